"""bench's contract: what a run is asked (:class:`BenchConfig`), its progress
(:class:`BenchProgress`), each run's result (:class:`RunResult`) and the summary the ledger stores
of it (:class:`RunSummary`), each level pooled over its repeats (:class:`LevelSummary`) and the
whole result (:class:`BenchResult`). Pure types; ops builds them, the ledger stores their
encoding (:func:`~servelab.core.ledger.codec.encode`), report renders them.

One shape per type: a field's JSON name is its alias, so ``bench --json``, the ledger's
``summary`` column and ``ledger export`` hold the same keys (``ok``, ``output_throughput``,
``client`` ...). A run summary stored before the level was encoded (``n_ok``, ``throughput`` ...)
is read by :mod:`servelab.core.bench.upgrade`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field, computed_field

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswersConfig, ArmAnswers
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load import metrics as m
from servelab.core.load.cache import CacheSummary, SessionSummary
from servelab.core.load.clienthealth import ClientHealth
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.load.records import RequestRecord
from servelab.core.load.slo import SLO
from servelab.core.load.trace import TracePlan
from servelab.core.load.workload import MAX_REQUESTS, LengthDist
from servelab.core.redacted import StoredHeaders, StoredText, StoredUrl
from servelab.core.stats import Interval, Summary
from servelab.core.telemetry.rules import TelemetryEvidence
from servelab.core.telemetry.summary import RunTelemetry
from servelab.core.telemetry.traces import RunTraces, TraceSummary

__all__ = [
    "PLACEHOLDER_MODEL",
    "TRACE_CONNECT_AHEAD",
    "TRACE_IN_FLIGHT",
    "TRACE_LEVEL",
    "BenchConfig",
    "BenchProgress",
    "BenchProgressFn",
    "BenchResult",
    "LevelClient",
    "LevelSummary",
    "RunResult",
    "RunSummary",
    "SaveFn",
]


#: The one "concurrency" of a trace replay: it has none (it sends what the trace says, when).
TRACE_LEVEL = 0
#: A trace replay's most requests in flight (its client's slots), and the connections it opens
#: before its run (more are opened as the trace needs them).
TRACE_IN_FLIGHT = 4096
TRACE_CONNECT_AHEAD = 32
#: The model a configuration names until a command asks the entry point which one it serves
#: (sglang-router 0.3.2 answered any name; smg routes by model and refuses one it does not list).
PLACEHOLDER_MODEL = "default"


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run. ``requests`` is per run, warm-up excluded; ``rate`` switches to open loop
    (Poisson) with the concurrency as the in-flight cap; ``trace`` replays a recorded trace
    instead (its one level is :data:`TRACE_LEVEL`; ``requests`` and ``rate`` do not apply);
    ``slo`` judges every run (goodput, attainment)."""

    url: StoredUrl
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
    #: The model every request names; the placeholder until a command resolves it from the
    #: entry point's ``/v1/models`` (``bench`` from its first model, ``ab``/``tune``/``case
    #: bisect`` in :func:`servelab.ops.arm.served_model`); encoded with a token in it masked
    #: (an engine's name for its model: :data:`~servelab.core.redacted.StoredText`).
    model: StoredText = PLACEHOLDER_MODEL
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
    #: Request headers every request carries (``bench --header NAME:VALUE``); encoded with
    #: secret-looking values redacted (:data:`~servelab.core.redacted.StoredHeaders`).
    headers: StoredHeaders = ()
    trace: TracePlan | None = None
    #: Greedy answer probes mixed into each run (``bench --check-answers``, the A/B's arms;
    #: :mod:`servelab.ops.answers.probing`); None: none. ``probe_round``: which of the set's
    #: probes a run sends (an experiment's round: both arms of a round send the same).
    answers: Annotated[AnswersConfig | None, OMITTED_IF_NONE] = None
    probe_round: Annotated[int | None, OMITTED_IF_NONE] = None
    #: The path to ``url`` (``bench --proxy``/``--no-proxy``, the proxy environment); None:
    #: straight, no proxy variable set (left out of the JSON).
    route: Annotated[ProxyRoute | None, OMITTED_IF_NONE] = None

    @property
    def proxy(self) -> str | None:
        """The forward proxy the requests go through (None: straight)."""
        return None if self.route is None or not self.route.forwarded else self.route.proxy

    def __post_init__(self) -> None:
        if self.trace is not None:
            if self.concurrencies != (TRACE_LEVEL,) or self.rate is not None:
                raise ValueError("a trace replay has one level and no rate")
        elif not self.concurrencies or min(self.concurrencies) < 1:
            raise ValueError("concurrency values must be positive")
        if self.requests < 1 or self.repeat < 1 or self.warmup < 0:
            raise ValueError("requests and repeat must be ≥ 1, warmup ≥ 0")
        if max(self.requests, self.warmup) > MAX_REQUESTS:
            raise ValueError(f"at most {MAX_REQUESTS:,} requests a run (and a warm-up)")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("rate must be positive")
        if self.workers < 1:
            raise ValueError("workers must be ≥ 1")
        if self.answers is not None and self.answers.on and "chat" not in self.endpoint:
            raise ValueError("answer probes are chat requests: they need the chat endpoint")


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
class LevelClient:
    """How the client fared at one level, over its repeats: CPU per token (mean), event-loop lag
    (worst), why it may have been the bottleneck (``reasons``: codes, worded in report/), and how
    many client processes shared the users."""

    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    reasons: tuple[str, ...]
    workers: int


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """Everything measured at one concurrency, pooled over its repeats (all times in ms).

    The JSON names are the aliases (what ``bench --json`` always printed); ``failed`` is derived:
    written, ignored when read. A request cut by the run's end (``--deadline``, a stop:
    :data:`~servelab.core.load.metrics.CUT_REASONS`) is ``cut``: neither ok, nor failed, nor
    among ``failures`` (as the result's own ``failed`` and ``cut``)."""

    concurrency: int
    n_runs: Annotated[int, Field(alias="runs")]
    n_requests: Annotated[int, Field(alias="requests")]
    n_ok: Annotated[int, Field(alias="ok")]
    #: failed requests per reason, most frequent first (a cut request is not among them)
    failures: Mapping[str, int]
    throughput: Annotated[Summary, Field(alias="output_throughput")]
    throughput_ci: Annotated[Interval, Field(alias="output_throughput_ci")]
    steady_throughput: Annotated[Summary, Field(alias="steady_output_throughput")]
    request_throughput: Summary
    goodput: float | None
    output_tokens_usage: Annotated[bool, Field(alias="output_tokens_from_usage")]
    client: LevelClient
    connect_ms: Summary
    ttft_ms: Summary
    itl_ms: Summary
    gap_ms: Summary
    tpot_ms: Summary
    e2e_ms: Summary
    dispatch_ms: Summary
    #: where the TTFT went, per phase, over the repeats' traced requests (None: tracing off)
    traces: Annotated[TraceSummary | None, Field(alias="ttft_phases")] = None
    #: the repeats pooled against the config's SLO (None: no SLO)
    slo: m.SloAttainment | None = None
    #: what the engines' prefix caches served, over the repeats
    cache: CacheSummary = field(default_factory=CacheSummary)
    #: the repeats' answer probes against the references (None: not checked)
    answers: Annotated[ArmAnswers | None, OMITTED_IF_NONE] = None
    #: requests whose engine ``usage`` counts were not believed (negative, not whole, past the
    #: bound, fewer than the content events): their counted events stood instead
    usage_disagreed: int = 0
    #: requests cut by the run's end (``--deadline``, a stop): not failures
    n_cut: Annotated[int, Field(alias="cut")] = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> int:
        """Requests that failed (a cut one did not)."""
        return self.n_requests - self.n_ok - self.n_cut


@dataclass(frozen=True)
class RunSummary:
    """One run as the ledger's ``summary`` column holds it: the run's own metrics, its client,
    failures per reason, the run summarized as a level of one, and (when there) its SLO, its
    replayed conversations, what the servers counted and the rules read from it, and its join to
    the server spans (the spans themselves have rows of their own)."""

    concurrency: int
    repeat_index: int
    interrupted: bool
    deadline_hit: bool
    metrics: m.RunMetrics
    client: ClientHealth
    failures: Mapping[str, int]
    level: LevelSummary
    cache: CacheSummary = field(default_factory=CacheSummary)
    slo: Annotated[m.SloAttainment | None, OMITTED_IF_NONE] = None
    sessions: Annotated[tuple[SessionSummary, ...] | None, OMITTED_IF_NONE] = None
    telemetry: Annotated[RunTelemetry | None, OMITTED_IF_NONE] = None
    telemetry_evidence: Annotated[tuple[TelemetryEvidence, ...] | None, OMITTED_IF_NONE] = None
    traces: Annotated[RunTraces | None, OMITTED_IF_NONE] = None


@dataclass(slots=True)
class BenchResult:
    """All runs and their per-concurrency summaries. Its encoding (``bench --json``) holds the
    config, the levels and the failed count; the runs (their records) are stored per run."""

    config: BenchConfig
    runs: Annotated[list[RunResult], Field(exclude=True)] = field(default_factory=list)
    levels: list[LevelSummary] = field(default_factory=list)
    interrupted: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> int:
        """Failed requests over every run."""
        return sum(r.metrics.n_failed for r in self.runs)

    @property
    def n_failed(self) -> int:
        """Failed requests over every run."""
        return self.failed

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cut(self) -> int:
        """Requests cut by a run's end (``--deadline``, a stop) over every run: not failures."""
        return sum(r.metrics.n_cut for r in self.runs)


BenchProgressFn = Callable[[BenchProgress], None]
SaveFn = Callable[[RunResult], None]
