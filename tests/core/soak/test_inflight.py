"""The load a request met is the most in flight while it was out, not the count when it left."""

from __future__ import annotations

import random

import pytest

from servelab.core.soak.inflight import InFlight


def test_the_first_of_requests_sent_together_met_all_of_them() -> None:
    load = InFlight()
    tickets = [load.start() for _ in range(6)]
    assert [load.end(t) for t in tickets] == [6] * 6
    assert load.now == 0


def test_a_request_alone_met_itself_and_a_later_one_not_the_earlier_peak() -> None:
    load = InFlight()
    a, b, c = load.start(), load.start(), load.start()
    assert load.end(a) == 3 and load.end(b) == 3 and load.end(c) == 3
    alone = load.start()
    assert load.end(alone) == 1  # the earlier peak was over before it left
    first = load.start()
    second = load.start()
    assert load.end(second) == 2 and load.end(first) == 2


@pytest.mark.parametrize("seed", range(20))
def test_the_peak_matches_counting_every_start_it_overlapped(seed: int) -> None:
    rng = random.Random(seed)
    load = InFlight()
    out: dict[int, int] = {}
    starts: list[tuple[int, int]] = []
    for _ in range(400):
        if out and rng.random() < 0.5:
            ticket = rng.choice(list(out))
            began = out.pop(ticket)
            want = max(count for number, count in starts if number >= began)
            assert load.end(ticket) == want
        else:
            ticket = load.start()
            out[ticket] = ticket
            starts.append((ticket, load.now))
    assert load.now == len(out)
