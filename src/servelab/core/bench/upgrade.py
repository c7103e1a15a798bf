"""The older stored shapes of a bench run's summary, read into today's (pure; each step a typed
function from one age's shape, :mod:`servelab.core.bench.shapes`, to today's).

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
from typing import Literal, get_args

from servelab.core.bench.contract import LevelSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.shapes import (
    OldLevel,
    StoredClient,
    StoredInterval,
    StoredLevel,
    StoredPhases,
    StoredSample,
)
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.metrics import CUT_REASONS
from servelab.core.stats import summarize
from servelab.errors import RecordError

__all__ = ["stored_level"]


_SampleKey = Literal["output_throughput", "steady_output_throughput", "request_throughput",
                     "connect_ms", "ttft_ms", "itl_ms", "gap_ms", "tpot_ms", "e2e_ms",
                     "dispatch_ms"]  # fmt: skip
_SUMMARIES: tuple[_SampleKey, ...] = get_args(_SampleKey)
_EMPTY_CI: StoredInterval = {"estimate": math.nan, "low": math.nan, "high": math.nan,
                             "confidence": 0.95, "method": "", "n": 0}  # fmt: skip
_CLIENT: StoredClient = {"cpu_ms_per_token": None, "loop_lag_p99_ms": 0.0,
                         "loop_lag_max_ms": 0.0, "client_bound": False, "reasons": [],
                         "workers": 1}  # fmt: skip


def _phases(traces: StoredPhases | None) -> StoredPhases | None:
    """A level's TTFT phases as the dataclass named them (``phases``) → ``phases_ms``."""
    if isinstance(traces, Mapping) and "phases" in traces and "phases_ms" not in traces:
        out = traces.copy()
        out["phases_ms"] = out.pop("phases")
        return out
    return traces


def _client(old: OldLevel) -> StoredClient:
    """The client's fields: today's ``client``, with an older level's flat fields where it
    lacks them, then the defaults of a level stored before a field existed."""
    stored = old.get("client")
    given: StoredClient = stored if isinstance(stored, Mapping) else {}
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


def _renamed(old: OldLevel) -> StoredLevel:
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


def _cut_apart(level: StoredLevel) -> None:
    """A level stored before its ``cut`` existed counted the requests its run's end cut among its
    ``failures``: they are taken out into ``cut`` (so ``failed`` reads as it does today)."""
    failures = level.get("failures")
    if "cut" in level or not isinstance(failures, Mapping):
        return
    cut = {r: n for r, n in failures.items() if r in CUT_REASONS}
    counts = [n for n in cut.values() if isinstance(n, int) and not isinstance(n, bool)]
    if len(counts) != len(cut):  # not counts: the codec refuses the level as it always did
        return
    level["failures"] = {r: n for r, n in failures.items() if r not in CUT_REASONS}
    level["cut"] = sum(counts)


def _upgrade_level(old: OldLevel) -> StoredLevel:
    """A run's stored ``level`` of any age → today's :class:`LevelSummary` JSON: a sample not
    stored reads as empty, a statistic missing from a stored sample as NaN, a cut request
    counted among the failures (before ``cut``) as cut."""
    level: StoredLevel = {"concurrency": 0, "runs": 0, "requests": 0, "ok": 0, "failures": {},
                     "goodput": None, "output_tokens_from_usage": False}  # fmt: skip
    level.update(_renamed(old))
    _cut_apart(level)
    empty: StoredSample = encode(summarize([]))
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
    level = run.summary.get("level")
    if not isinstance(level, Mapping):
        return None
    try:
        return decode(LevelSummary, _upgrade_level(level))
    except RecordError:
        return None
