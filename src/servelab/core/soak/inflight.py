"""The load each of a run's requests met: the most requests in flight at once while it was out.

Counting at the moment a request is sent undercounts: sessions that start together each see
only those sent before them, and the first one sent, which met every other, reads as alone.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["InFlight"]


@dataclass(slots=True)
class InFlight:
    """Requests outstanding now; :meth:`start` returns a ticket, :meth:`end` the peak it met.

    Every start is an event with the count it made; a request's peak is the largest count of
    the events from its own start on (answered from a stack of the events whose counts no later
    event reached, in ``O(log n)``).
    """

    now: int = 0
    _events: int = 0
    _index: list[int] = field(default_factory=list)  # event numbers, rising
    _count: list[int] = field(default_factory=list)  # their counts, falling

    def start(self) -> int:
        """One more request out; its ticket (the number of its start event)."""
        self.now += 1
        ticket = self._events
        self._events += 1
        while self._count and self._count[-1] <= self.now:
            self._count.pop()
            self._index.pop()
        self._index.append(ticket)
        self._count.append(self.now)
        return ticket

    def end(self, ticket: int) -> int:
        """The request of ``ticket`` is over: the most requests in flight at once while it was
        out, itself included."""
        self.now -= 1
        at = bisect.bisect_left(self._index, ticket)
        return self._count[at]
