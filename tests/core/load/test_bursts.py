"""A replay's dispatch delay by place in a burst: the requests of one instant in index order."""

from __future__ import annotations

import pytest

from servelab.core.load.bursts import BURST_PLACES, burst_places
from servelab.core.load.records import RequestRecord


def _sent(index: int, scheduled_ns: int, late_ms: float) -> RequestRecord:
    return RequestRecord(
        index, scheduled_ns=scheduled_ns, sent_ns=scheduled_ns + int(late_ms * 1e6)
    )


def test_each_place_of_a_burst_has_its_own_delays_in_the_traces_order() -> None:
    # a burst of 12 at t=1 s (written in reverse: the index, not the list, orders it), a lone
    # request at t=0, a later turn at its own instant, one never sent
    burst = [_sent(k, 1_000_000_000, float(k)) for k in range(1, 13)][::-1]
    records = [_sent(0, 0, 0.5), *burst, _sent(13, 2_000_000_000, 0.25)]
    records.append(RequestRecord(14, scheduled_ns=1_000_000_000))  # not sent: left out
    places = burst_places(records)
    assert [(p.first, p.last) for p in places] == list(BURST_PLACES)
    first, second, third, rest = places
    assert first.dispatch_ms.n == 3  # the lone request, the burst's first, the later turn
    assert first.dispatch_ms.max == pytest.approx(1.0) and first.dispatch_ms.min == pytest.approx(
        0.25
    )
    assert (second.dispatch_ms.n, second.dispatch_ms.min, second.dispatch_ms.max) == (4, 2.0, 5.0)
    assert (third.dispatch_ms.n, third.dispatch_ms.max) == (5, 10.0)
    assert (rest.dispatch_ms.n, rest.dispatch_ms.min, rest.dispatch_ms.max) == (2, 11.0, 12.0)


def test_no_burst_no_places() -> None:
    assert burst_places([_sent(0, 0, 1.0), _sent(1, 5, 1.0)]) == ()
    assert burst_places([]) == ()
    # a burst of three: the places past it are not shown
    three = burst_places([_sent(k, 7, 0.1) for k in range(3)])
    assert [(p.first, p.dispatch_ms.n) for p in three] == [(1, 1), (2, 2)]
