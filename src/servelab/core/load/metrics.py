"""Latency and throughput metrics computed from :class:`RequestRecord` lists (pure).

Definitions (all latencies from the SCHEDULED send time, so waiting for a slot is never hidden):

- TTFT: first event with non-empty content (text, reasoning, a tool call's arguments) − scheduled
  send (an empty role chunk does not count).
- dispatch delay: actual send − scheduled send (the client's own lateness; reported separately).
- per-gap ITL: every gap between consecutive content events after the first content event
  (events that carry no content, such as the finish or usage chunk, are not gaps between tokens).
- per-request ITL: the mean of that request's gaps; TPOT: (E2E − TTFT) / (output tokens − 1).
- E2E: end of body − scheduled send.
- output-token throughput: output tokens of successful requests / run wall time; request
  throughput likewise; goodput: successful requests meeting every SLO / run wall time.

Against an SLO (:mod:`servelab.core.load.slo`), each objective is judged on its metric's values
in the run: a successful request gives its TTFT, TPOT (two or more output tokens) and E2E, and each
of its gaps; a failed request counts once, outside every limit. The objective is met when the share
within the limit is at least its percentile, and that share's exact binomial interval
(Clopper-Pearson, 95%) says whether it is surely met or missed (values taken as independent: the
gaps of one request are not quite, so an ``itl`` interval is somewhat narrow). A request meets the
SLO (goodput) when it succeeded, its TTFT, TPOT and E2E are within their limits, and the share of
its own gaps within an ``itl`` limit is at least that objective's percentile.

A request cut by the run's end (:data:`CUT_REASONS`: ``--deadline``, a stop) did not fail: it is
judged as far as it went (censored). What it measured counts (a TTFT that came, the gaps between
its tokens); the wait it was cut in is a miss when that wait alone passed the limit (sent, and no
first token within a TTFT limit; an E2E limit passed; an open gap longer than an ``itl`` limit).
What is not known yet (sent, cut waiting under the limit; a TPOT or E2E before the request ended)
is ``unknown``: never a verdict it did not earn. An objective is met only when it holds with the
unknown ones counted outside (a deadline that cuts the slow requests never leaves only the fast
to be judged), and a miss they could turn (all within) is not sure. A cut request never meets the
SLO (goodput); a sent one counts among its requests.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import computed_field

from servelab.core.load.records import FailReason, RequestRecord
from servelab.core.load.slo import SLO, Objective, SloMetric
from servelab.core.stats import percentile, scipy_stats

__all__ = [
    "CUT_REASONS",
    "SLO_CONFIDENCE",
    "ObjectiveResult",
    "RunMetrics",
    "SloAttainment",
    "content_event_ns",
    "dispatch_delay_ns",
    "e2e_ns",
    "failures_by_reason",
    "gaps_ns",
    "is_cut",
    "itl_ns",
    "meets_slo",
    "run_metrics",
    "slo_attainment",
    "steady_window_ns",
    "tokens_between",
    "tpot_ns",
    "ttft_ns",
]


#: The reasons of a request cut by the run's end (``bench --deadline``, a stop), not failed by
#: the server: counted apart (``n_cut``), never as failures.
CUT_REASONS = frozenset({FailReason.DEADLINE.value, FailReason.INTERRUPTED.value})

#: The confidence of an objective's interval.
SLO_CONFIDENCE = 0.95


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


def _values_ns(record: RequestRecord, metric: SloMetric) -> list[float] | None:
    """A successful request's values of ``metric``: none where it is undefined (TPOT below two
    tokens, ITL without a gap), None where it must be and is not (no content: no TTFT)."""
    if metric == SloMetric.ITL:
        return [float(g) for g in gaps_ns(record)]
    one = {SloMetric.TTFT: ttft_ns, SloMetric.TPOT: tpot_ns, SloMetric.E2E: e2e_ns}[metric](record)
    if one is None:
        return [] if metric == SloMetric.TPOT else None
    return [float(one)]


def _holds(objective: Objective, within: int, n: int) -> bool:
    return n > 0 and within * 100.0 >= objective.percentile * n - 1e-9


def meets_slo(record: RequestRecord, slo: SLO) -> bool:
    """True when a successful request is within every objective of ``slo`` (an ``itl``
    objective: at least its percentile of the request's own gaps within the limit)."""
    if not record.ok:
        return False
    for objective in slo.objectives:
        values = _values_ns(record, objective.metric)
        if values is None:
            return False
        within = sum(v <= objective.limit_ms * 1e6 for v in values)
        if values and not _holds(objective, within, len(values)):
            return False
    return True


@dataclass(frozen=True, slots=True)
class ObjectiveResult:
    """One objective judged on a run: ``n`` values (a failed request is one, outside; a cut one
    gives what it measured, and a wait that alone passed the limit),
    ``within`` the limit, the run's percentile of the successful values (``value_ms``, type 7;
    NaN without any), and the share within's Clopper-Pearson interval ``[low, high]``.
    ``unknown``: the requests the run's end cut, sent, of which nothing of this metric is known
    yet (waiting under the limit; a TPOT or E2E not ended): counted outside for the verdict (met
    only when it holds with them outside), and a miss they could turn (all within) is not sure."""

    objective: Objective
    n: int
    within: int
    value_ms: float
    low: float
    high: float
    unknown: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def attainment(self) -> float:
        """The share of values within the limit (NaN without values)."""
        return self.within / self.n if self.n else math.nan

    @computed_field  # type: ignore[prop-decorator]
    @property
    def met(self) -> bool:
        """At least the objective's percentile of the values were within the limit, every
        unknown request counted outside."""
        return _holds(self.objective, self.within, self.n + self.unknown)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sure(self) -> bool:
        """The interval lies wholly on the side of the verdict (met: its low end at or above the
        share; missed: its high end below, and missed still with every unknown request within)."""
        share = self.objective.share
        if self.met:
            return self.low >= share
        turned = _holds(self.objective, self.within + self.unknown, self.n + self.unknown)
        return self.n > 0 and self.high < share and not turned


@dataclass(frozen=True, slots=True)
class SloAttainment:
    """A run (or the pooled runs of a level) against an SLO: each objective, and how many of its
    ``requests`` were ``good`` (succeeded within every objective: :func:`meets_slo`); a request
    cut by the run's end is among ``requests`` only when it is a known miss."""

    slo: SLO
    objectives: tuple[ObjectiveResult, ...]
    requests: int
    good: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def attainment(self) -> float:
        """The share of requests that met every objective (NaN without requests)."""
        return self.good / self.requests if self.requests else math.nan

    @computed_field  # type: ignore[prop-decorator]
    @property
    def met(self) -> bool:
        """Every objective met."""
        return all(o.met for o in self.objectives)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sure(self) -> bool:
        """Every objective's verdict sure at :data:`SLO_CONFIDENCE`."""
        return all(o.sure for o in self.objectives)


def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    """The exact binomial interval of ``k`` successes in ``n`` (Clopper & Pearson 1934)."""
    if n == 0:
        return math.nan, math.nan
    beta, alpha = scipy_stats().beta, 1.0 - SLO_CONFIDENCE
    low = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high


def is_cut(record: RequestRecord) -> bool:
    """Cut by the run's end (a deadline, a stop), not failed by the server."""
    return not record.ok and record.error in CUT_REASONS


def _censored_ns(record: RequestRecord, objective: Objective) -> list[float]:
    """A cut request's values of ``objective``'s metric as far as they are known: what it
    measured, and the wait it was cut in when that alone passes the limit (a known miss)."""
    end, limit = record.end_ns, objective.limit_ms * 1e6
    if end is None or not record.sent_ns:  # never sent: nothing known of the server
        return []
    waited = float(end - record.scheduled_ns)
    metric = objective.metric
    if metric == SloMetric.TTFT:
        first = ttft_ns(record)
        if first is not None:
            return [float(first)]
        return [waited] if waited > limit else []
    if metric == SloMetric.E2E:
        return [waited] if waited > limit else []
    if metric == SloMetric.ITL:
        gaps = [float(g) for g in gaps_ns(record)]
        times = content_event_ns(record)
        open_gap = float(end - times[-1]) if times else 0.0
        return gaps + ([open_gap] if open_gap > limit else [])
    return []  # TPOT: not known before the request ends


def _judge(records: Sequence[RequestRecord], objective: Objective) -> ObjectiveResult:
    each = [
        _values_ns(r, objective.metric)
        if r.ok
        else _censored_ns(r, objective)
        if is_cut(r)
        else None
        for r in records
    ]
    values = sorted(v for got in each if got is not None for v in got)
    unknown = sum(1 for r, got in zip(records, each, strict=True)
                  if is_cut(r) and r.sent_ns and not got)  # fmt: skip
    failed = sum(got is None for got in each)
    limit = objective.limit_ms * 1e6
    within = sum(v <= limit for v in values)
    n = len(values) + failed
    low, _ = _clopper_pearson(within, n + unknown)  # met: sure with the unknown outside
    _, high = _clopper_pearson(within, n)  # missed: sure on what is known
    value = percentile(values, objective.percentile) / 1e6 if values else math.nan
    return ObjectiveResult(objective, n, within, value, low, high, unknown)


def slo_attainment(records: Sequence[RequestRecord], slo: SLO) -> SloAttainment:
    """The measured (not warm-up) ``records`` against ``slo``; a request cut by the run's end
    judged as far as it went (see the module docstring)."""
    measured = [r for r in records if not r.warmup]
    counted = [r for r in measured if not is_cut(r) or r.sent_ns]  # a cut one sent: never good
    return SloAttainment(
        slo,
        tuple(_judge(measured, o) for o in slo.objectives),
        len(counted),
        sum(1 for r in counted if meets_slo(r, slo)),
    )


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
    #: Requests cut by the run's end (:data:`CUT_REASONS`): neither ok nor failed.
    n_cut: int = 0


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
    cut = sum(1 for r in measured if is_cut(r))
    tokens = sum(r.output_tokens for r in ok)
    good = None if slo is None else sum(1 for r in ok if meets_slo(r, slo)) / seconds
    return RunMetrics(
        n_requests=len(measured),
        n_ok=len(ok),
        n_failed=len(measured) - len(ok) - cut,
        n_cut=cut,
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
