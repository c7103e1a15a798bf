"""The older stored shapes of a bench run's summary, read into today's (pure; JSON in, JSON out).

Until the level became one typed :class:`~servelab.core.bench.contract.LevelSummary` encoded by
the codec, a run's ``summary["level"]`` held the dataclass's field names (``n_ok``, ``throughput``,
``throughput_ci``, ``cpu_ms_per_token`` ... flat, ``traces`` with ``phases``) while ``bench --json``
printed other keys (``ok``, ``output_throughput``, ``client: {...}``, ``ttft_phases`` with
``phases_ms``). Nothing is rewritten on disk: :func:`stored_level` reads either (today's is left
as it is) from a run's record into today's type; a level stored before a field existed reads it
as empty (an empty sample, no traces, no SLO), a statistic missing from a stored sample as NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal, TypedDict, get_args

from pydantic import JsonValue

from servelab.core.bench.contract import LevelSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode, encode
from servelab.core.stats import summarize
from servelab.errors import RecordError

__all__ = ["stored_level"]


class _Sample(TypedDict, total=False):
    """A :class:`~servelab.core.stats.Summary` as stored (an older one may lack a statistic)."""

    n: int
    mean: float | None
    std: float | None
    median: float | None
    p90: float | None
    p99: float | None
    min: float | None
    max: float | None


class _Interval(TypedDict, total=False):
    """A :class:`~servelab.core.stats.Interval` as stored."""

    estimate: float | None
    low: float | None
    high: float | None
    confidence: float
    method: str
    n: int


class _Client(TypedDict, total=False):
    """The client's fields, grouped under ``client`` (today), flat in the level (before)."""

    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    reasons: list[str]
    workers: int


class _Phases(TypedDict, total=False):
    """The TTFT phases as stored: ``phases_ms`` (today), ``phases`` (the dataclass's name);
    the rest is decoded as it is."""

    n_requests: int
    n_traced: int
    n_routed: int
    max_abs_gap_ms: float | None
    phases: dict[str, JsonValue]
    phases_ms: dict[str, JsonValue]


class _Level(TypedDict, total=False):
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
    output_throughput: _Sample
    output_throughput_ci: _Interval
    steady_output_throughput: _Sample
    request_throughput: _Sample
    connect_ms: _Sample
    ttft_ms: _Sample
    itl_ms: _Sample
    gap_ms: _Sample
    tpot_ms: _Sample
    e2e_ms: _Sample
    dispatch_ms: _Sample
    client: _Client
    ttft_phases: _Phases | None
    slo: JsonValue
    cache: JsonValue
    answers: JsonValue
    usage_disagreed: int


class _OldLevel(_Level, total=False):
    """A level stored before it was encoded by the codec: the dataclass's field names (left:
    today's, :class:`_Level`), the client's fields flat."""

    n_runs: int  # runs
    n_requests: int  # requests
    n_ok: int  # ok
    throughput: _Sample  # output_throughput
    throughput_ci: _Interval  # output_throughput_ci
    steady_throughput: _Sample  # steady_output_throughput
    output_tokens_usage: bool  # output_tokens_from_usage
    traces: _Phases | None  # ttft_phases
    cpu_ms_per_token: float | None  # client.cpu_ms_per_token, and so on
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    client_bound: bool
    client_reasons: list[str]  # client.reasons
    workers: int


_SampleKey = Literal["output_throughput", "steady_output_throughput", "request_throughput",
                     "connect_ms", "ttft_ms", "itl_ms", "gap_ms", "tpot_ms", "e2e_ms",
                     "dispatch_ms"]  # fmt: skip
_SUMMARIES: tuple[_SampleKey, ...] = get_args(_SampleKey)
_EMPTY_CI: _Interval = {"estimate": math.nan, "low": math.nan, "high": math.nan,
                        "confidence": 0.95, "method": "", "n": 0}  # fmt: skip
_CLIENT: _Client = {"cpu_ms_per_token": None, "loop_lag_p99_ms": 0.0, "loop_lag_max_ms": 0.0,
                    "client_bound": False, "reasons": [], "workers": 1}  # fmt: skip


def _phases(traces: _Phases | None) -> _Phases | None:
    """A level's TTFT phases as the dataclass named them (``phases``) → ``phases_ms``."""
    if isinstance(traces, Mapping) and "phases" in traces and "phases_ms" not in traces:
        out = traces.copy()
        out["phases_ms"] = out.pop("phases")
        return out
    return traces


def _client(old: _OldLevel) -> _Client:
    """The client's fields: today's ``client``, with an older level's flat fields where it
    lacks them, then the defaults of a level stored before a field existed."""
    stored = old.get("client")
    given: _Client = stored if isinstance(stored, Mapping) else {}
    client = given.copy()
    if "cpu_ms_per_token" in old and "cpu_ms_per_token" not in given:
        client["cpu_ms_per_token"] = old["cpu_ms_per_token"]
    if "loop_lag_p99_ms" in old and "loop_lag_p99_ms" not in given:
        client["loop_lag_p99_ms"] = old["loop_lag_p99_ms"]
    if "loop_lag_max_ms" in old and "loop_lag_max_ms" not in given:
        client["loop_lag_max_ms"] = old["loop_lag_max_ms"]
    if "client_bound" in old and "client_bound" not in given:
        client["client_bound"] = old["client_bound"]
    if "client_reasons" in old and "reasons" not in given:
        client["reasons"] = old["client_reasons"]
    if "workers" in old and "workers" not in given:
        client["workers"] = old["workers"]
    return {**_CLIENT, **client}


def _renamed(old: _OldLevel) -> _Level:
    """``old`` with the dataclass's names read as today's (today's kept where both are) and the
    client's flat fields taken out (:func:`_client` reads them)."""
    out = old.copy()
    if "n_runs" in out:
        out.setdefault("runs", out.pop("n_runs"))
    if "n_requests" in out:
        out.setdefault("requests", out.pop("n_requests"))
    if "n_ok" in out:
        out.setdefault("ok", out.pop("n_ok"))
    if "throughput" in out:
        out.setdefault("output_throughput", out.pop("throughput"))
    if "throughput_ci" in out:
        out.setdefault("output_throughput_ci", out.pop("throughput_ci"))
    if "steady_throughput" in out:
        out.setdefault("steady_output_throughput", out.pop("steady_throughput"))
    if "output_tokens_usage" in out:
        out.setdefault("output_tokens_from_usage", out.pop("output_tokens_usage"))
    if "traces" in out:
        out.setdefault("ttft_phases", out.pop("traces"))
    out.pop("cpu_ms_per_token", None)
    out.pop("loop_lag_p99_ms", None)
    out.pop("loop_lag_max_ms", None)
    out.pop("client_bound", None)
    out.pop("client_reasons", None)
    out.pop("workers", None)
    return out


def _upgrade_level(old: _OldLevel) -> _Level:
    """A run's stored ``level`` of any age → today's :class:`LevelSummary` JSON: a sample not
    stored reads as empty, a statistic missing from a stored sample as NaN."""
    level: _Level = {"concurrency": 0, "runs": 0, "requests": 0, "ok": 0, "failures": {},
                     "goodput": None, "output_tokens_from_usage": False}  # fmt: skip
    level.update(_renamed(old))
    empty: _Sample = encode(summarize([]))
    for name in _SUMMARIES:
        sample = level.get(name)
        level[name] = {**empty, **sample} if isinstance(sample, Mapping) else empty
    ci = level.get("output_throughput_ci")
    level["output_throughput_ci"] = {**_EMPTY_CI, **ci} if isinstance(ci, Mapping) else _EMPTY_CI
    level["client"] = _client(old)
    level["ttft_phases"] = _phases(level.get("ttft_phases"))
    return level


def stored_level(run: BenchRunRecord) -> LevelSummary | None:
    """The level of a stored run's ``summary`` of any age; None when it holds none (or one that
    no longer reads: the page shows the run without it)."""
    level: _OldLevel | None = run.summary.get("level")  # decoded JSON of any age: checked below
    if not isinstance(level, Mapping):
        return None
    try:
        return decode(LevelSummary, _upgrade_level(level))
    except RecordError:
        return None
