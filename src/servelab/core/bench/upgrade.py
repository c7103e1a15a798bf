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
from typing import Any

from servelab.core.bench.contract import LevelSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import JsonObject, decode, encode
from servelab.core.stats import summarize
from servelab.errors import RecordError

__all__ = ["stored_level"]

#: The level's old field names → today's JSON names.
_RENAMED = {
    "n_runs": "runs",
    "n_requests": "requests",
    "n_ok": "ok",
    "throughput": "output_throughput",
    "throughput_ci": "output_throughput_ci",
    "steady_throughput": "steady_output_throughput",
    "output_tokens_usage": "output_tokens_from_usage",
    "traces": "ttft_phases",
}
#: The client's fields, stored flat (left) before they were grouped under ``client`` (right).
_CLIENT = {
    "cpu_ms_per_token": "cpu_ms_per_token",
    "loop_lag_p99_ms": "loop_lag_p99_ms",
    "loop_lag_max_ms": "loop_lag_max_ms",
    "client_bound": "client_bound",
    "client_reasons": "reasons",
    "workers": "workers",
}
_SUMMARIES = ("output_throughput", "steady_output_throughput", "request_throughput", "connect_ms",
              "ttft_ms", "itl_ms", "gap_ms", "tpot_ms", "e2e_ms", "dispatch_ms")  # fmt: skip
_EMPTY_CI = {"estimate": math.nan, "low": math.nan, "high": math.nan, "confidence": 0.95,
             "method": "", "n": 0}  # fmt: skip


def _obj(value: Any) -> JsonObject:
    return dict(value) if isinstance(value, Mapping) else {}


def _old_traces(traces: Any) -> Any:
    """A level's TTFT phases as the dataclass named them (``phases``) → ``phases_ms``."""
    if isinstance(traces, Mapping) and "phases" in traces and "phases_ms" not in traces:
        return {k: v for k, v in traces.items() if k != "phases"} | {"phases_ms": traces["phases"]}
    return traces


def _upgrade_level(doc: Mapping[str, Any]) -> JsonObject:
    """A run's stored ``level`` of any age → today's :class:`LevelSummary` JSON."""
    out = {_RENAMED.get(k, k): v for k, v in doc.items() if k not in _CLIENT}
    client = _obj(out.pop("client", None))
    client |= {new: doc[old] for old, new in _CLIENT.items() if old in doc and new not in client}
    client = {"cpu_ms_per_token": None, "loop_lag_p99_ms": 0.0, "loop_lag_max_ms": 0.0,
              "client_bound": False, "reasons": [], "workers": 1} | client  # fmt: skip
    empty = encode(summarize([]))
    summaries = {name: empty | _obj(out.get(name)) for name in _SUMMARIES}
    ci = _obj(out.get("output_throughput_ci"))
    return {
        "concurrency": 0, "runs": 0, "requests": 0, "ok": 0, "failures": {}, "goodput": None,
        "output_tokens_from_usage": False,
        **out, **summaries, "client": client, "output_throughput_ci": _EMPTY_CI | ci,
        "ttft_phases": _old_traces(out.get("ttft_phases")),
    }  # fmt: skip


def stored_level(run: BenchRunRecord) -> LevelSummary | None:
    """The level of a stored run's ``summary`` of any age; None when it holds none (or one that
    no longer reads: the page shows the run without it)."""
    level = run.summary.get("level")
    if not isinstance(level, Mapping):
        return None
    try:
        return decode(LevelSummary, _upgrade_level(level))
    except RecordError:
        return None
