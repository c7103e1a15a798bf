"""A recorded bench run as its page reads it (pure): its stored ``summary``, of any age, read once
into types, so no renderer reads the stored JSON.

The level is today's :class:`~servelab.core.bench.contract.LevelSummary` whatever its age
(:func:`~servelab.core.bench.upgrade.stored_level`); the prefix cache, the SLO and the
telemetry rules' readings are their own types, as they have been stored since they existed. The
servers' counters and the TTFT phases are read leniently (:class:`StoredTelemetry`,
:class:`StoredTraces`): a run recorded with fewer keys, or a phase with fewer quantiles, shows
what it has; a part that does not read at all is left out (None), as a run recorded before it
existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, TypeVar

from pydantic import Field

from servelab.core.bench.contract import LevelSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.upgrade import stored_level
from servelab.core.ledger.codec import decode
from servelab.core.load.cache import CacheSummary
from servelab.core.load.metrics import CUT_REASONS, SloAttainment
from servelab.core.telemetry.rules import TelemetryEvidence
from servelab.errors import RecordError

__all__ = [
    "StoredPhase",
    "StoredRun",
    "StoredSource",
    "StoredTelemetry",
    "StoredTraces",
    "stored_run",
]

T = TypeVar("T")


@dataclass(frozen=True)
class StoredPhase:
    """One TTFT phase's quantiles (ms) as recorded; a quantile not recorded is None."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass(frozen=True)
class StoredTraces:
    """Where a run's TTFT went, as its summary's ``traces.summary`` holds it."""

    n_requests: int = 0
    n_traced: int = 0
    n_untraced: int = 0
    n_routed: int = 0
    max_abs_gap_ms: float | None = None
    phases: Annotated[Mapping[str, StoredPhase], Field(alias="phases_ms")] = field(
        default_factory=dict
    )


@dataclass(frozen=True)
class StoredSource:
    """One metrics source of a run as recorded: ``state`` ``ok`` with its counters' deltas and
    rates, else why it is unknown."""

    service: str | None = None
    kind: str | None = None
    state: str | None = None
    reason: str | None = None
    counters: Mapping[str, float | None] = field(default_factory=dict)
    rates: Mapping[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredTelemetry:
    """What the router and the engines counted over a run, as recorded."""

    sources: tuple[StoredSource, ...] = ()


@dataclass(frozen=True)
class _Traces:
    summary: StoredTraces | None = None


@dataclass(frozen=True)
class _Metrics:
    goodput: float | None = None


@dataclass(frozen=True)
class StoredRun:
    """A recorded run's summary, typed: each part None when the run was recorded without it."""

    level: LevelSummary | None
    #: failed requests by reason, never one the run's end cut (``cut``)
    failures: Mapping[str, int]
    cache: CacheSummary | None = None
    slo: SloAttainment | None = None
    #: good requests per second (the run's metrics), beside the SLO
    goodput: float | None = None
    telemetry: StoredTelemetry | None = None
    evidence: tuple[TelemetryEvidence, ...] | None = None
    traces: StoredTraces | None = None
    #: requests the run's end cut (``--deadline``, a stop) by reason: never failures
    cut: Mapping[str, int] = field(default_factory=dict)


def _lenient(kind: type[T], value: object) -> T | None:
    """``value`` read as ``kind``; None when it is no JSON object or does not read."""
    if not isinstance(value, Mapping):
        return None
    try:
        return decode(kind, value)
    except RecordError:
        return None


def _counts(failures: Mapping[str, object]) -> dict[str, int]:
    return {
        str(k): v for k, v in failures.items() if isinstance(v, int) and not isinstance(v, bool)
    }


def stored_run(run: BenchRunRecord) -> StoredRun:
    """The run's stored summary read into types: its ``failures`` (which count the requests its
    end cut, at every age) split into ``failures`` and ``cut``. The cache, the SLO and the
    readings are read strictly (a misfit is a :class:`~servelab.errors.RecordError`, as it
    always was)."""
    summary = run.summary
    cache, slo, evidence = (
        summary.get("cache"),
        summary.get("slo"),
        summary.get("telemetry_evidence"),
    )
    failures = summary.get("failures")
    counts = _counts(failures) if isinstance(failures, Mapping) else {}  # the cut among them
    traces = _lenient(_Traces, summary.get("traces"))
    metrics = _lenient(_Metrics, summary.get("metrics")) if isinstance(slo, Mapping) else None
    return StoredRun(
        level=stored_level(run),
        failures={r: n for r, n in counts.items() if r not in CUT_REASONS},
        cache=decode(CacheSummary, cache) if isinstance(cache, Mapping) else None,
        slo=decode(SloAttainment, slo) if isinstance(slo, Mapping) else None,
        goodput=None if metrics is None else metrics.goodput,
        telemetry=_lenient(StoredTelemetry, summary.get("telemetry")),
        evidence=(
            tuple(decode(TelemetryEvidence, d) for d in evidence)
            if isinstance(evidence, list)
            else None
        ),
        traces=None if traces is None else traces.summary,
        cut={r: n for r, n in counts.items() if r in CUT_REASONS},
    )
