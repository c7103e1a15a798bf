"""bench's contract: one shape per type. ``bench --json`` prints the encoded result (its keys what
users read before the contract moved to core), the ledger stores the encoded run summary, and a
summary stored before reads into the same level."""

from __future__ import annotations

import json
from typing import Any

from servelab.core.bench import contract, summary, upgrade
from servelab.core.bench.contract import BenchConfig, RunResult, RunSummary
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.summary import result_so_far, run_summary, summarize_level
from servelab.core.bench.upgrade import stored_level
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.clienthealth import ClientHealth
from servelab.core.load.metrics import run_metrics
from servelab.core.load.records import RequestRecord
from servelab.report.bench import result_json
from tests.support.old_rows import BENCH_JSON_BEFORE_CONTRACT, BENCH_SUMMARY_BEFORE_CONTRACT

CONFIG = BenchConfig(url="http://x", concurrencies=(2,), requests=5, label="old")


def _run() -> RunResult:
    """The run the old rows were written from: four answers of four tokens and one HTTP 500."""
    records = []
    for i in range(4):
        r = RequestRecord(index=i, scheduled_ns=1_000_000 * i, input_tokens=128)
        r.sent_ns = r.scheduled_ns + 1000
        r.first_byte_ns, r.end_ns = r.sent_ns + 5_000_000, r.sent_ns + 20_000_000
        r.status, r.output_tokens, r.tokens_from_usage = 200, 4, True
        r.event_ns = [r.sent_ns + 5_000_000 + k * 5_000_000 for k in range(4)]
        r.event_tokens = [1, 1, 1, 1]
        records.append(r)
    bad = RequestRecord(index=4, scheduled_ns=5_000_000, input_tokens=128)
    bad.sent_ns, bad.end_ns, bad.status, bad.error = 5_001_000, 6_000_000, 500, "http 500"
    records.append(bad)
    client = ClientHealth(0.01, 0.1, 0.0123, 1.5, 2.5, 0.2, True, ("loop-lag",))
    metrics = run_metrics(records, concurrency=2)
    return RunResult(2, 0, records, metrics, client, setup_ns=[300_000, 400_000])


def test_public_api() -> None:
    assert set(contract.__all__) == {
        "PLACEHOLDER_MODEL", "TRACE_CONNECT_AHEAD", "TRACE_IN_FLIGHT", "TRACE_LEVEL",
        "BenchConfig", "BenchProgress", "BenchProgressFn", "BenchResult", "LevelClient",
        "LevelSummary", "RunResult", "RunSummary", "SaveFn",
    }  # fmt: skip
    assert set(summary.__all__) == {"result_so_far", "run_summary", "summarize_level"}
    assert set(upgrade.__all__) == {"stored_level"}


def _without_interval_additions(doc: Any) -> Any:
    """``doc`` without what the contract added to the throughput interval (its estimate and n),
    and the count of requests cut by a run's end (``cut``, apart from the failures since), and
    without the path the load took (said since forward proxies), and the count of requests whose
    usage was not believed (``usage_disagreed``)."""
    assert doc.pop("cut") == 0
    assert doc.pop("path") == "straight (no proxy variable set for its scheme)"
    for level in doc["levels"]:
        assert level.pop("usage_disagreed") == 0  # added with the bounds on usage counts
        assert level.pop("cut") == 0  # a level's cut requests apart from its failures since
        ci = level["output_throughput_ci"]
        assert (ci.pop("estimate"), ci.pop("n")) == (level["output_throughput"]["mean"], 1)
    return doc


def test_bench_json_keeps_every_key_and_value_users_read() -> None:
    """``bench --json`` is the encoded result plus words: the same document as before the
    contract, but for the interval's estimate and n and the cut count it now also prints."""
    doc = json.loads(result_json(result_so_far(CONFIG, [_run()])))
    assert _without_interval_additions(doc) == json.loads(BENCH_JSON_BEFORE_CONTRACT)


def test_the_level_has_one_shape_in_json_and_in_the_ledger() -> None:
    run = _run()
    level = summarize_level(2, [run])
    stored = encode(run_summary(run))
    assert (
        stored["level"]
        == encode(level)
        == json.loads(result_json(result_so_far(CONFIG, [run])))["levels"][0]
    )
    assert {"ok", "output_throughput", "client", "failed"} <= set(stored["level"])
    assert not {"n_ok", "throughput", "cpu_ms_per_token"} & set(stored["level"])
    back = decode(RunSummary, json.loads(json.dumps(stored)))
    assert encode(back) == stored and back.level.n_ok == 4 and back.level.client.workers == 1


def _stored(summary: dict[str, Any]) -> BenchRunRecord:
    """A bench run's record as the ledger reads it back, holding ``summary``."""
    return BenchRunRecord(1, "2026-12-01T00:00:00Z", None, {}, summary)


def test_a_summary_stored_before_the_contract_reads_into_the_same_level() -> None:
    old = json.loads(BENCH_SUMMARY_BEFORE_CONTRACT)
    assert "n_ok" in old["level"] and "ok" not in old["level"]
    level = stored_level(_stored(old))
    assert level is not None
    assert encode(level) == encode(summarize_level(2, [_run()]))
    assert (level.n_ok, level.n_requests, level.failures) == (4, 5, {"http 500": 1})
    assert level.client.reasons == ("loop-lag",) and level.client.cpu_ms_per_token == 0.0123


def test_upgrading_today_s_level_leaves_it_as_it_is() -> None:
    today = encode(summarize_level(2, [_run()]))
    level = stored_level(_stored({"level": today}))
    assert level is not None and encode(level) == today


def test_a_level_stored_with_missing_statistics_reads_them_as_unknown() -> None:
    level = stored_level(
        _stored({"level": {"concurrency": 64, "n_ok": 9, "throughput": {"mean": 5.0}}})
    )
    assert level is not None and level.concurrency == 64 and level.throughput.mean == 5.0
    assert level.ttft_ms.n == 0 and level.traces is None
    assert stored_level(_stored({})) is None
    assert stored_level(_stored({"level": {"concurrency": "x"}})) is None


def test_a_level_stored_with_the_dataclass_s_phases_and_a_partial_client_reads() -> None:
    """The older level's TTFT phases under ``traces``/``phases`` read as ``ttft_phases``/
    ``phases_ms``; a ``client`` missing a field takes it from the flat older field, then the
    default."""
    phases = {"queue": {"p50": 1.0, "p90": 2.0, "p99": 3.0}}
    old = {"concurrency": 8, "n_ok": 3, "n_requests": 3, "workers": 2, "client_reasons": ["cpu"],
           "client": {"loop_lag_p99_ms": 4.5},
           "traces": {"n_requests": 3, "n_traced": 2, "n_routed": 0, "max_abs_gap_ms": None,
                      "phases": phases}}  # fmt: skip
    level = stored_level(_stored({"level": old}))
    assert level is not None and level.traces is not None
    assert (level.traces.n_traced, level.traces.phases["queue"].p99) == (2, 3.0)
    assert (level.client.workers, level.client.reasons, level.client.loop_lag_p99_ms) == (
        2, ("cpu",), 4.5)  # fmt: skip
    assert (level.client.loop_lag_max_ms, level.client.cpu_ms_per_token) == (0.0, None)
    assert (level.n_ok, level.failures, level.goodput) == (3, {}, None)
