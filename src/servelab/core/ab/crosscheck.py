"""An A/B's client-measured ratio against the servers' own (pure).

Each visit of an A/B keeps the output tok/s the client measured and the output tok/s the decodes'
own counters gave over the same run (``server_throughput``). A knob that really changes the
engines moves both ratios (candidate/baseline) together; a client-side artefact (a saturated load
generator, its own queueing) moves the client's alone. :func:`disagreements` flags every
concurrency whose two ratios differ by more than :data:`RATIO_TOLERANCE` (relative: client ratio
over server ratio, minus one), with both values.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import computed_field

__all__ = ["RATIO_TOLERANCE", "ServerDisagreement", "disagreements", "server_ratios"]

#: the client's and the servers' candidate/baseline ratios may differ by this much (relative)
RATIO_TOLERANCE = 0.05


@dataclass(frozen=True)
class ServerDisagreement:
    """At ``concurrency`` the client's ratio and the servers' differ beyond ``tolerance``."""

    concurrency: int
    client_ratio: float
    server_ratio: float
    tolerance: float = RATIO_TOLERANCE

    @computed_field  # type: ignore[prop-decorator]
    @property
    def difference(self) -> float:
        """Client ratio over server ratio, minus one (``+0.11``: the client sees 11% more)."""
        return self.client_ratio / self.server_ratio - 1.0


def server_ratios(
    baseline: Mapping[int, Sequence[float]], candidate: Mapping[int, Sequence[float]]
) -> dict[int, float]:
    """Per concurrency, the mean of the candidate's server tok/s over the baseline's (only where
    both arms have a value and the baseline's is positive)."""
    out = {}
    for conc in sorted(set(baseline) & set(candidate)):
        base, cand = baseline[conc], candidate[conc]
        if base and cand and statistics.fmean(base) > 0:
            out[conc] = statistics.fmean(cand) / statistics.fmean(base)
    return out


def disagreements(
    client: Mapping[int, float],
    server: Mapping[int, float],
    tolerance: float = RATIO_TOLERANCE,
) -> list[ServerDisagreement]:
    """Every concurrency with both ratios whose client ratio and server ratio differ by more
    than ``tolerance``; a concurrency without a server ratio is not judged (unknown)."""
    out = []
    for conc in sorted(set(client) & set(server)):
        flag = ServerDisagreement(conc, client[conc], server[conc], tolerance)
        if server[conc] > 0 and abs(flag.difference) > tolerance:
            out.append(flag)
    return out
