"""Which clock judges a replay cell (pure): the idle timeout, a deadline, or none.

A streamed answer sends its tokens as they come, so a stream that sends no byte for the idle
timeout has stalled (:func:`servelab.core.soak.signatures.stall`). A non-streamed answer sends
no byte until it is complete: the idle timeout says nothing about it. A non-streamed cell is
judged by a deadline from the answer it may be (:func:`plain_deadline`):

    deadline = margin * (ttft + expected_output_tokens / tokens_per_second)  (at least FLOOR_S)

where ``expected_output_tokens`` is the request's ``max_tokens`` (the longest answer it may be),
``tokens_per_second`` the decode rate the soak's own successful streams measured (their median)
and ``ttft`` their median time to first token (:func:`measured_rate`), ``margin`` is
:data:`PLAIN_MARGIN`. A non-streamed cell with no deadline (no stream succeeded, or the request
states no answer length) that got no answer in time cannot be judged: it is
:attr:`Clock.UNDECIDED`, never a failure (:func:`clock_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from statistics import median

from servelab.core.load.records import RequestRecord

__all__ = [
    "FLOOR_S",
    "PLAIN_MARGIN",
    "Clock",
    "DecodeRate",
    "clock_of",
    "expected_tokens",
    "measured_rate",
    "plain_deadline",
]

#: The margin a non-streamed answer's decode time gets over the measured rate.
PLAIN_MARGIN = 3.0
#: A non-streamed deadline is never shorter than this (seconds).
FLOOR_S = 1.0


class Clock(StrEnum):
    """What judged a cell (values stored in the ledger)."""

    IDLE = "idle"  # streamed: no byte for the idle timeout is a stall
    DEADLINE = "deadline"  # not streamed: no answer by the deadline from its expected length
    UNDECIDED = "undecided"  # not streamed, no deadline known, and no answer within the bound
    ANSWER = "answer"  # not streamed, no deadline known: judged by what it answered


@dataclass(frozen=True, slots=True)
class DecodeRate:
    """The decode rate the soak's successful streams measured: output tokens per second and
    time to first token (their medians), and how many streams it is from."""

    tokens_per_s: float
    ttft_s: float
    streams: int


def _rate(r: RequestRecord) -> tuple[float, float] | None:
    """One successful stream's (tokens per second after its first token, time to first token)."""
    if not r.ok or len(r.event_ns) < 2 or r.output_tokens < 2 or not r.sent_ns:
        return None
    decode_s = (r.event_ns[-1] - r.event_ns[0]) / 1e9
    if decode_s <= 0:
        return None
    return (r.output_tokens - 1) / decode_s, (r.event_ns[0] - r.sent_ns) / 1e9


def measured_rate(records: Iterable[RequestRecord]) -> DecodeRate | None:
    """The decode rate of the successful streams among ``records`` (None: none measured one)."""
    rates = [x for x in map(_rate, records) if x is not None]
    if not rates:
        return None
    return DecodeRate(median(t for t, _ in rates), median(f for _, f in rates), len(rates))


def expected_tokens(body: object) -> int | None:
    """The longest answer a chat request may get: its ``max_completion_tokens`` or
    ``max_tokens`` (None: it states none, or is no JSON object)."""
    if not isinstance(body, dict):
        return None
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def plain_deadline(
    expected: int | None, rate: DecodeRate | None, margin: float = PLAIN_MARGIN
) -> float | None:
    """Seconds a non-streamed answer of up to ``expected`` tokens gets at ``rate`` (see the
    module docstring); None when it cannot be derived."""
    if expected is None or rate is None or rate.tokens_per_s <= 0:
        return None
    return max(FLOOR_S, margin * (rate.ttft_s + expected / rate.tokens_per_s))


def clock_of(stream: bool, stalled: bool, deadline: float | None) -> Clock:
    """The clock that judged a cell: a stream's is the idle timeout; a non-streamed one's the
    deadline, or undecided when it has none and it got no answer in time."""
    if stream:
        return Clock.IDLE
    if deadline is not None:
        return Clock.DEADLINE
    return Clock.UNDECIDED if stalled else Clock.ANSWER
