"""A soak's deadlines: every time budget derived from its idle timeout, in one place (pure).

The idle timeout (``--idle-timeout``) is the stall rule: a stream that gets no byte for that long
has stalled (:func:`servelab.core.soak.signatures.stall`). Everything else a soak bounds in time
follows from it (and, for the budgets that must fit in the run, from its duration), here and
nowhere else:

==================  ===========================================  ===================================
budget              value                                        bounds
==================  ===========================================  ===================================
``probe_s``         ``min(5, idle)``                             one probe or scrape of an engine
``connect_s``       ``min(10, idle)``                            opening a connection
``scrape_s``        ``min(2, idle)``                             one scrape of the metrics watch
``hold_check_s``    ``3 × idle``                                 what the hold check needs left
``matrix_s``        ``8 × idle``                                 a replay matrix without a deadline
``warm_up_s``       ``max(idle, duration / 4)``                  the warm-up before traffic
``reserve_s``       ``min(4 × idle + 4 × probe_s + 1,            time kept after the traffic for
                    duration / 2)``                              the hold check and localizations
==================  ===========================================  ===================================

The reserve covers the matrix's two turns, a reused-connection replay, then two probe rounds and
two scrapes (a matrix's later turns run only while they fit). A non-streamed answer's own deadline
is not here: it comes from the measured decode rate (:mod:`servelab.core.soak.clock`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CONNECT_CAP_S", "PROBE_CAP_S", "SCRAPE_CAP_S", "Deadlines"]

#: One probe or scrape of an engine or the router never waits longer than this (seconds).
PROBE_CAP_S = 5.0
#: Opening a connection never waits longer than this (seconds).
CONNECT_CAP_S = 10.0
#: One scrape of the metrics watch never waits longer than this (seconds).
SCRAPE_CAP_S = 2.0


@dataclass(frozen=True, slots=True)
class Deadlines:
    """The named set of a soak's time budgets (see the module docstring), from its idle timeout
    ``idle_s`` and its duration ``duration_s`` (infinite: a bound that needs none, such as one
    localization's)."""

    idle_s: float
    duration_s: float = math.inf

    @property
    def probe_s(self) -> float:
        return min(PROBE_CAP_S, self.idle_s)

    @property
    def connect_s(self) -> float:
        return min(CONNECT_CAP_S, self.idle_s)

    @property
    def scrape_s(self) -> float:
        return min(SCRAPE_CAP_S, self.idle_s)

    @property
    def hold_check_s(self) -> float:
        return 3 * self.idle_s

    @property
    def matrix_s(self) -> float:
        return 8 * self.idle_s

    @property
    def warm_up_s(self) -> float:
        return max(self.idle_s, self.duration_s / 4)

    @property
    def reserve_s(self) -> float:
        return min(4 * self.idle_s + 4 * self.probe_s + 1.0, self.duration_s / 2)
