"""A replay's dispatch delay by a request's place in its burst: the requests a trace schedules at
one instant (a real trace records many on one whole second), in the trace's order. The dispatch
delay (actual send − scheduled send) is the client's own lateness: a server cannot delay a send."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.load.metrics import dispatch_delay_ns
from servelab.core.load.records import RequestRecord
from servelab.core.stats import Summary, summarize

__all__ = ["BURST_PLACES", "BurstPlace", "burst_places"]

#: The places of a burst told apart, ``(first, last)``, 1-based; ``last`` None: to the end.
BURST_PLACES: tuple[tuple[int, int | None], ...] = ((1, 1), (2, 5), (6, 10), (11, None))


@dataclass(frozen=True, slots=True)
class BurstPlace:
    """The dispatch delay (ms) of the requests at places ``first`` to ``last`` of their burst."""

    first: int
    last: int | None
    dispatch_ms: Summary


def burst_places(records: Sequence[RequestRecord]) -> tuple[BurstPlace, ...]:
    """The dispatch delay of the sent requests by their place among those scheduled at their
    instant (ordered by index: the trace's order); none when no instant held two requests."""
    instants: dict[int, list[float]] = {}
    for record in sorted((r for r in records if r.sent_ns), key=lambda r: r.index):
        instants.setdefault(record.scheduled_ns, []).append(dispatch_delay_ns(record) / 1e6)
    if max(map(len, instants.values()), default=0) < 2:
        return ()
    places = []
    for first, last in BURST_PLACES:
        ms = [d for burst in instants.values() for d in burst[first - 1 : last]]
        if ms:
            places.append(BurstPlace(first, last, summarize(ms)))
    return tuple(places)
