"""What a bench run is asked and what it found: the configuration, the progress events, each run's
result, each level's summary pooled over its repeats, and the run's payload for the ledger (no
I/O but the ledger's writer, called by :func:`record_run`).

:mod:`servelab.ops.bench.bench` runs them and re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswersConfig, ArmAnswers
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.load import metrics as m
from servelab.core.load.cache import (
    CacheSummary,
    SessionSummary,
    cache_summary,
)
from servelab.core.load.clienthealth import ClientHealth
from servelab.core.load.records import RequestRecord, record_to_dict
from servelab.core.load.slo import SLO
from servelab.core.load.trace import TracePlan
from servelab.core.load.workload import LengthDist
from servelab.core.stats import Interval, Summary, summarize, t_interval
from servelab.core.telemetry.rules import run_evidence
from servelab.core.telemetry.summary import RunTelemetry
from servelab.core.telemetry.traces import RunTraces, TraceSummary, summarize_traces
from servelab.io.ledger.ledger import Ledger

__all__ = [
    "TRACE_CONNECT_AHEAD",
    "TRACE_IN_FLIGHT",
    "TRACE_LEVEL",
    "BenchConfig",
    "BenchProgress",
    "BenchProgressFn",
    "BenchResult",
    "LevelSummary",
    "RunResult",
    "SaveFn",
    "record_run",
    "result_so_far",
    "run_payload",
    "summarize_level",
]


#: The one "concurrency" of a trace replay: it has none (it sends what the trace says, when).
TRACE_LEVEL = 0
#: A trace replay's most requests in flight (its client's slots), and the connections it opens
#: before its run (more are opened as the trace needs them).
TRACE_IN_FLIGHT = 4096
TRACE_CONNECT_AHEAD = 32


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run. ``requests`` is per run, warm-up excluded; ``rate`` switches to open loop
    (Poisson) with the concurrency as the in-flight cap; ``trace`` replays a recorded trace
    instead (its one level is :data:`TRACE_LEVEL`; ``requests`` and ``rate`` do not apply);
    ``slo`` judges every run (goodput, attainment)."""

    url: str
    concurrencies: tuple[int, ...] = (1,)
    requests: int = 100
    input_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 64))
    repeat: int = 1
    rate: float | None = None
    warmup: int = 0
    idle_timeout_s: float = 60.0
    deadline_s: float | None = None
    seed: int = 0
    model: str = "default"
    label: str = ""
    endpoint: str = "/v1/chat/completions"
    slo: SLO | None = None
    shared_prefix_len: int = 0
    ignore_eos: bool = True
    #: Closed loop: slot i sends its first request ``i * ramp_s / concurrency`` after the start, so
    #: the users do not move in lockstep. None: the median E2E of this level's warm-up requests.
    ramp_s: float | None = None
    #: Client processes sharing the users (``bench --workers``), at most one per user.
    workers: int = 1
    #: Request headers every request carries (``bench --header NAME:VALUE``).
    headers: tuple[tuple[str, str], ...] = ()
    trace: TracePlan | None = None
    #: Greedy answer probes mixed into each run (``bench --check-answers``, the A/B's arms;
    #: :mod:`servelab.ops.answers.probing`); None: none. ``probe_round``: which of the set's
    #: probes a run sends (an experiment's round: both arms of a round send the same).
    answers: AnswersConfig | None = None
    probe_round: int = 0

    def __post_init__(self) -> None:
        if self.trace is not None:
            if self.concurrencies != (TRACE_LEVEL,) or self.rate is not None or self.workers > 1:
                raise ValueError("a trace replay has one level, no rate and one client process")
        elif not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrency values must be positive")
        if self.requests < 1 or self.repeat < 1 or self.warmup < 0:
            raise ValueError("requests and repeat must be ≥ 1, warmup ≥ 0")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.workers < 1:
            raise ValueError("workers must be ≥ 1")
        if self.answers is not None and self.answers.on and "chat" not in self.endpoint:
            raise ValueError("answer probes are chat requests: they need the chat endpoint")

    def to_dict(self) -> JsonObject:
        """A JSON-ready dict of the configuration."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class BenchProgress:
    """One progress report: ``phase`` is "warmup", "run" or "done".

    In a "run" event ``done`` counts the requests that ended (not those sent), so it reaches
    ``total`` once per run, whatever the concurrency.
    """

    phase: str
    concurrency: int
    repeat_index: int
    done: int
    total: int


@dataclass(slots=True)
class RunResult:
    """One run at one concurrency: its records (warm-up excluded), metrics and client health."""

    concurrency: int
    repeat_index: int
    records: list[RequestRecord]
    metrics: m.RunMetrics
    client: ClientHealth
    interrupted: bool = False
    deadline_hit: bool = False
    run_id: int | None = None  # its ledger row, once recorded
    #: Connection set-up times (ns) of the connect phase before the run and of any connection
    #: opened during it: set-up is its own phase, never inside a TTFT.
    setup_ns: list[int] = field(default_factory=list)
    workers: int = 1
    #: what the router and the engines counted over the run (None: not watched)
    telemetry: RunTelemetry | None = None
    #: its requests joined to their server spans (None: tracing off)
    traces: RunTraces | None = None
    #: the run against the config's SLO (None: no SLO)
    slo: m.SloAttainment | None = None
    #: what the engines' prefix caches served
    cache: CacheSummary = field(default_factory=CacheSummary)
    #: a replayed trace's conversations
    sessions: tuple[SessionSummary, ...] = ()
    #: what the run's answer probes were answered (kept out of ``records`` and the metrics)
    answers: tuple[Answer, ...] = ()


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """Everything measured at one concurrency, pooled over its repeats (all times in ms)."""

    concurrency: int
    n_runs: int
    n_requests: int
    n_ok: int
    failures: dict[str, int]
    throughput: Summary
    throughput_ci: Interval
    steady_throughput: Summary
    request_throughput: Summary
    goodput: float | None
    ttft_ms: Summary
    itl_ms: Summary
    gap_ms: Summary
    tpot_ms: Summary
    e2e_ms: Summary
    dispatch_ms: Summary
    output_tokens_usage: bool
    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    client_reasons: tuple[str, ...]
    connect_ms: Summary
    workers: int
    #: where the TTFT went, per phase, over the repeats' traced requests (None: tracing off)
    traces: TraceSummary | None = None
    #: the repeats pooled against the config's SLO (None: no SLO)
    slo: m.SloAttainment | None = None
    #: what the engines' prefix caches served, over the repeats
    cache: CacheSummary = field(default_factory=CacheSummary)
    #: the repeats' answer probes against the references (None: not checked)
    answers: ArmAnswers | None = None


@dataclass(slots=True)
class BenchResult:
    """All runs and their per-concurrency summaries."""

    config: BenchConfig
    runs: list[RunResult] = field(default_factory=list)
    levels: list[LevelSummary] = field(default_factory=list)
    interrupted: bool = False

    @property
    def n_failed(self) -> int:
        """Failed requests over every run."""
        return sum(r.metrics.n_failed for r in self.runs)


def _ms(values: Sequence[float]) -> Summary:
    return summarize([v / 1e6 for v in values])


def summarize_level(
    concurrency: int, runs: Sequence[RunResult], slo: SLO | None = None
) -> LevelSummary:
    """Pool the runs at one concurrency: per-request distributions, throughput across runs, the
    pooled requests against ``slo``."""
    records = [r for run in runs for r in run.records]
    ok = [r for r in records if r.ok]
    tput = [run.metrics.output_throughput for run in runs]
    goodputs = [run.metrics.goodput for run in runs if run.metrics.goodput is not None]
    cpu = [run.client.cpu_ms_per_token for run in runs if run.client.cpu_ms_per_token is not None]
    reasons = tuple(sorted({x for run in runs for x in run.client.reasons}))
    return LevelSummary(
        concurrency=concurrency,
        n_runs=len(runs),
        n_requests=len(records),
        n_ok=len(ok),
        failures=m.failures_by_reason(records),
        throughput=summarize(tput),
        throughput_ci=t_interval(tput),
        steady_throughput=summarize(
            [x for run in runs if (x := run.metrics.steady_throughput) is not None]
        ),
        request_throughput=summarize([run.metrics.request_throughput for run in runs]),
        goodput=sum(goodputs) / len(goodputs) if goodputs else None,
        ttft_ms=_ms([x for r in ok if (x := m.ttft_ns(r)) is not None]),
        itl_ms=_ms([y for r in ok if (y := m.itl_ns(r)) is not None]),
        gap_ms=_ms([g for r in ok for g in m.gaps_ns(r)]),
        tpot_ms=_ms([z for r in ok if (z := m.tpot_ns(r)) is not None]),
        e2e_ms=_ms([x for r in ok if (x := m.e2e_ns(r)) is not None]),
        dispatch_ms=_ms([m.dispatch_delay_ns(r) for r in records if r.sent_ns]),
        output_tokens_usage=bool(ok) and all(r.tokens_from_usage for r in ok),
        cpu_ms_per_token=sum(cpu) / len(cpu) if cpu else None,
        loop_lag_p99_ms=max(run.client.loop_lag_p99_ms for run in runs),
        loop_lag_max_ms=max(run.client.loop_lag_max_ms for run in runs),
        client_bound=bool(reasons),
        client_reasons=reasons,
        connect_ms=_ms([x for run in runs for x in run.setup_ns]),
        workers=max(run.workers for run in runs),
        traces=_level_traces(runs),
        slo=None if slo is None else m.slo_attainment(records, slo),
        cache=cache_summary(records),
    )


def _level_traces(runs: Sequence[RunResult]) -> TraceSummary | None:
    joined = [run.traces for run in runs if run.traces is not None]
    if not joined:
        return None
    breakdowns = [b for t in joined for b in t.breakdowns]
    return summarize_traces(breakdowns, len(breakdowns) + sum(len(t.untraced) for t in joined))


def run_payload(run: RunResult) -> tuple[JsonObject, list[JsonObject]]:
    """``(summary, records)`` of one run as JSON-ready data, for the ledger's writer."""
    summary = {
        "concurrency": run.concurrency,
        "repeat_index": run.repeat_index,
        "interrupted": run.interrupted,
        "deadline_hit": run.deadline_hit,
        "metrics": asdict(run.metrics),
        "client": asdict(run.client),
        "failures": m.failures_by_reason(run.records),
        "level": asdict(summarize_level(run.concurrency, [run])),
        "cache": encode(run.cache),
    }
    if run.slo is not None:
        summary["slo"] = encode(run.slo)
    if run.sessions:
        summary["sessions"] = encode(run.sessions)
    if run.telemetry is not None:
        summary["telemetry"] = encode(run.telemetry)
        evidence = run_evidence(run.telemetry, run.records)
        summary["telemetry_evidence"] = [encode(e) for e in evidence]
    if run.traces is not None:
        summary["traces"] = run.traces.to_json()
    if run.answers:
        summary["answers"] = encode(run.answers)
    return summary, [record_to_dict(r) for r in run.records]


def record_run(ledger: Ledger, config: BenchConfig, run: RunResult) -> int:
    """Record one run (config, summary, every per-request record, its received spans) in the
    ledger; its row id."""
    summary, records = run_payload(run)
    run.run_id = ledger.record_bench_run(
        label=config.label or None, config=config.to_dict(), summary=summary, records=records,
        spans=() if run.traces is None else run.traces.spans,
    )  # fmt: skip
    return run.run_id


def result_so_far(
    config: BenchConfig, runs: Sequence[RunResult], *, interrupted: bool = False
) -> BenchResult:
    """The :class:`BenchResult` of the runs done so far (levels summarized in sweep order)."""
    levels = []
    for concurrency in config.concurrencies:
        at = [r for r in runs if r.concurrency == concurrency]
        if at:
            levels.append(summarize_level(concurrency, at, config.slo))
    return BenchResult(config, list(runs), levels, interrupted)


BenchProgressFn = Callable[[BenchProgress], None]
SaveFn = Callable[[RunResult], None]
