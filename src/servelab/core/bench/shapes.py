"""A bench run's parts as the ledger stores them, of every age (pure; types only).

A ``bench_runs`` row keeps its config, its summary and its per-request records as the servelab
of its day wrote them (:data:`~servelab.core.ledger.codec.Stored`: read and exported as they
are). The ``TypedDict`` s here name the keys their readers read, with the types they had: the
config (:class:`StoredBenchConfig`, the :class:`~servelab.core.bench.contract.BenchConfig` it was
encoded from), the summary (:class:`StoredRunSummary`, a
:class:`~servelab.core.bench.contract.RunSummary`), its level of either age (:class:`OldLevel`:
the dataclass's names before the codec wrote the level; :class:`StoredLevel`: today's, ``bench
--json``'s), a per-request record (:class:`StoredRequestRecord`). A key not named is kept as it
was; a part typed ``JsonValue`` is read by the codec into its own type where it is used
(:mod:`servelab.core.bench.stored`), never here.
"""

from __future__ import annotations

from typing import TypedDict

from pydantic import JsonValue

__all__ = [
    "OldLevel",
    "StoredBenchConfig",
    "StoredClient",
    "StoredInterval",
    "StoredLevel",
    "StoredMetrics",
    "StoredPhases",
    "StoredRequestRecord",
    "StoredRunSummary",
    "StoredSample",
]


class StoredBenchConfig(TypedDict, total=False):
    """A run's config: the keys read from it (where it ran, the levels and repeats of the
    invocation it was one run of: ``investigate --symptom slow`` finds its baseline by them)."""

    url: str
    concurrencies: list[int]
    concurrency: int
    repeat: int
    label: str


class StoredMetrics(TypedDict, total=False):
    """A run's metrics (:class:`~servelab.core.load.metrics.RunMetrics`): what a baseline is
    compared on."""

    output_throughput: float
    steady_throughput: float | None
    goodput: float | None


class StoredSample(TypedDict, total=False):
    """A :class:`~servelab.core.stats.Summary` as stored (an older one may lack a statistic)."""

    n: int
    mean: float | None
    std: float | None
    median: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None


class StoredInterval(TypedDict, total=False):
    """A :class:`~servelab.core.stats.Interval` as stored."""

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str
    n: int


class StoredClient(TypedDict, total=False):
    """The client's fields, grouped under ``client`` (today), flat in the level (before)."""

    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    reasons: list[str]
    workers: int


class StoredPhases(TypedDict, total=False):
    """The TTFT phases as stored: ``phases_ms`` (today), ``phases`` (the dataclass's name);
    the rest is decoded as it is."""

    n_requests: int
    n_traced: int
    n_routed: int
    max_abs_gap_ms: float | None
    phases: dict[str, JsonValue]
    phases_ms: dict[str, JsonValue]


class StoredLevel(TypedDict, total=False):
    """A run's stored ``level``, today's keys (``bench --json``'s). ``slo``, ``cache``,
    ``answers`` and ``failures`` are stored as their types have always been: the codec reads them
    (never this module)."""

    concurrency: int
    runs: int
    requests: int
    ok: int
    failures: dict[str, JsonValue]
    goodput: float | None
    output_tokens_from_usage: bool
    output_throughput: StoredSample
    output_throughput_ci: StoredInterval
    steady_output_throughput: StoredSample
    request_throughput: StoredSample
    connect_ms: StoredSample
    ttft_ms: StoredSample
    itl_ms: StoredSample
    gap_ms: StoredSample
    tpot_ms: StoredSample
    e2e_ms: StoredSample
    dispatch_ms: StoredSample
    client: StoredClient
    ttft_phases: StoredPhases | None
    slo: JsonValue
    cache: JsonValue
    answers: JsonValue
    usage_disagreed: int
    cut: int


class OldLevel(StoredLevel, total=False):
    """A level stored before it was encoded by the codec: the dataclass's field names (left:
    today's, :class:`StoredLevel`), the client's fields flat."""

    n_runs: int  # runs
    n_requests: int  # requests
    n_ok: int  # ok
    throughput: StoredSample  # output_throughput
    throughput_ci: StoredInterval  # output_throughput_ci
    steady_throughput: StoredSample  # steady_output_throughput
    output_tokens_usage: bool  # output_tokens_from_usage
    traces: StoredPhases | None  # ttft_phases
    cpu_ms_per_token: float | None  # client.cpu_ms_per_token, and so on
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    client_reasons: list[str]  # client.reasons
    workers: int


class StoredRunSummary(TypedDict, total=False):
    """A run's summary: its level and metrics, whether it ended early; its cache, SLO, telemetry,
    readings and TTFT phases read by the codec where they are shown."""

    concurrency: int
    repeat_index: int
    interrupted: bool
    deadline_hit: bool
    metrics: StoredMetrics
    level: OldLevel
    failures: dict[str, JsonValue]
    client: JsonValue
    cache: JsonValue
    slo: JsonValue
    sessions: JsonValue
    telemetry: JsonValue
    telemetry_evidence: JsonValue
    traces: JsonValue


class StoredRequestRecord(TypedDict, total=False):
    """One request's record as stored (:class:`~servelab.core.load.records.RequestRecord`;
    older ledgers wrote fewer keys): exported as it is, read by no one else."""

    index: int
    scheduled_ns: int
    input_tokens: int
    sent_ns: int
    first_byte_ns: int | None
    end_ns: int | None
    status: int | None
    error: str | None
    error_detail: str
    output_tokens: int
    tokens_from_usage: bool
    usage_disagreed: bool
    warmup: bool
    event_ns: list[int]
    event_tokens: list[int]
    request_id: str
    traceparent: str
    cached_tokens: int | None
    session: int | None
