"""Latency and throughput metrics computed from :class:`RequestRecord` lists (pure).

Definitions (all latencies from the SCHEDULED send time, so waiting for a slot is never hidden):

- TTFT: first event with non-empty content − scheduled send (an empty role chunk does not count).
- dispatch delay: actual send − scheduled send (the client's own lateness; reported separately).
- per-gap ITL: every gap between consecutive content events after the first content event
  (events that carry no content, such as the finish or usage chunk, are not gaps between tokens).
- per-request ITL: the mean of that request's gaps; TPOT: (E2E − TTFT) / (output tokens − 1).
- E2E: end of body − scheduled send.
- output-token throughput: output tokens of successful requests / run wall time; request
  throughput likewise; goodput: successful requests meeting every SLO / run wall time.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from servelab.core.load.records import RequestRecord

__all__ = [
    "SLO",
    "RunMetrics",
    "content_event_ns",
    "dispatch_delay_ns",
    "e2e_ns",
    "failures_by_reason",
    "gaps_ns",
    "itl_ns",
    "meets_slo",
    "run_metrics",
    "steady_window_ns",
    "tokens_between",
    "tpot_ns",
    "ttft_ns",
]


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objectives for goodput, in milliseconds; ``None`` means no limit."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


def content_event_ns(record: RequestRecord) -> list[int]:
    """Decode times of the events that carried at least one content token."""
    return [t for t, n in zip(record.event_ns, record.event_tokens, strict=True) if n > 0]


def ttft_ns(record: RequestRecord) -> int | None:
    """Time to first content token from the scheduled send, or ``None`` if none arrived."""
    for t, n in zip(record.event_ns, record.event_tokens, strict=True):
        if n > 0:
            return t - record.scheduled_ns
    return None


def dispatch_delay_ns(record: RequestRecord) -> int:
    """Actual send − scheduled send."""
    return record.sent_ns - record.scheduled_ns


def e2e_ns(record: RequestRecord) -> int | None:
    """End of body − scheduled send, or ``None`` if the request never ended."""
    return None if record.end_ns is None else record.end_ns - record.scheduled_ns


def gaps_ns(record: RequestRecord) -> list[int]:
    """Every gap between consecutive content events (TTFT excluded)."""
    times = content_event_ns(record)
    return [b - a for a, b in itertools.pairwise(times)]


def itl_ns(record: RequestRecord) -> float | None:
    """Mean inter-token gap of one request, or ``None`` with fewer than two content events."""
    gaps = gaps_ns(record)
    return sum(gaps) / len(gaps) if gaps else None


def tpot_ns(record: RequestRecord) -> float | None:
    """(E2E − TTFT) / (output tokens − 1), or ``None`` when undefined."""
    first, total = ttft_ns(record), e2e_ns(record)
    if first is None or total is None or record.output_tokens < 2:
        return None
    return (total - first) / (record.output_tokens - 1)


def meets_slo(record: RequestRecord, slo: SLO) -> bool:
    """True when a successful request is within every limit of ``slo``."""
    checks = (
        (slo.ttft_ms, ttft_ns(record)),
        (slo.tpot_ms, tpot_ns(record)),
        (slo.e2e_ms, e2e_ns(record)),
    )
    for limit, value in checks:
        if limit is not None and (value is None or value > limit * 1e6):
            return False
    return record.ok


def failures_by_reason(records: Iterable[RequestRecord]) -> dict[str, int]:
    """Failed requests counted per reason, most frequent first."""
    counts = Counter(r.error for r in records if r.error is not None)
    return dict(counts.most_common())


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """The per-run aggregates (per-request distributions are summarised in ``stats``)."""

    n_requests: int
    n_ok: int
    n_failed: int
    duration_s: float
    output_tokens: int
    output_throughput: float
    request_throughput: float
    goodput: float | None
    #: Closed loop only: output tokens/s while every slot was busy (see :func:`steady_window_ns`).
    steady_throughput: float | None = None
    steady_window_s: float | None = None


def _window_ns(records: Sequence[RequestRecord]) -> int:
    start = min(r.scheduled_ns for r in records)
    end = max((r.end_ns for r in records if r.end_ns is not None), default=start)
    return max(end - start, 1)


def steady_window_ns(records: Sequence[RequestRecord], concurrency: int) -> tuple[int, int] | None:
    """The closed loop's steady state: from the first moment ``concurrency`` requests are in
    flight to the last send (after it no slot gets new work and the batch drains).

    Ramp-up and drain are where a closed loop's batch is below its concurrency; throughput measured
    over the whole run mixes them in and biases every comparison between concurrencies. ``None``
    when the run never had ``concurrency`` requests in flight before its last send.
    """
    measured = [r for r in records if not r.warmup and r.sent_ns]
    if concurrency < 1 or not measured:
        return None
    last_send = max(r.sent_ns for r in measured)
    # Sweep sends (+1) and ends (-1); at equal times an end comes first (a slot's next send
    # happens the instant its previous request ends).
    marks = sorted(
        [(r.sent_ns, 1) for r in measured]
        + [(r.end_ns, -1) for r in measured if r.end_ns is not None]
    )
    in_flight = 0
    for t, step in marks:
        in_flight += step
        if in_flight >= concurrency:
            return (t, last_send) if last_send > t else None
    return None


def tokens_between(records: Sequence[RequestRecord], start_ns: int, end_ns: int) -> int:
    """Content tokens of successful requests whose events were received in ``[start, end)``."""
    return sum(
        tokens
        for r in records
        if r.ok and not r.warmup
        for t, tokens in zip(r.event_ns, r.event_tokens, strict=False)
        if start_ns <= t < end_ns
    )


def run_metrics(
    records: Sequence[RequestRecord],
    *,
    slo: SLO | None = None,
    window_ns: int | None = None,
    concurrency: int | None = None,
) -> RunMetrics:
    """Aggregates of one run; the window defaults to first scheduled send → last end.

    With ``concurrency`` (a closed loop) the steady-state throughput is computed too.
    """
    measured = [r for r in records if not r.warmup]
    if not measured:
        return RunMetrics(0, 0, 0, 0.0, 0, 0.0, 0.0, None)
    window = window_ns if window_ns is not None else _window_ns(measured)
    seconds = window / 1e9
    ok = [r for r in measured if r.ok]
    tokens = sum(r.output_tokens for r in ok)
    good = None if slo is None else sum(1 for r in ok if meets_slo(r, slo)) / seconds
    return RunMetrics(
        n_requests=len(measured),
        n_ok=len(ok),
        n_failed=len(measured) - len(ok),
        duration_s=seconds,
        output_tokens=tokens,
        output_throughput=tokens / seconds,
        request_throughput=len(ok) / seconds,
        goodput=good,
        **_steady(measured, concurrency),
    )


def _steady(records: Sequence[RequestRecord], concurrency: int | None) -> dict[str, float]:
    window = None if concurrency is None else steady_window_ns(records, concurrency)
    if window is None:
        return {}
    seconds = (window[1] - window[0]) / 1e9
    return {
        "steady_throughput": tokens_between(records, *window) / seconds,
        "steady_window_s": seconds,
    }
