"""A level's requests cut by its run's end (``--deadline``, a stop) are its ``cut``, apart from
its failures, as the result's own ``failed`` and ``cut`` (the thirtieth hostile pass's medium);
a level stored before ``cut`` existed, its cut requests among its failures, reads the same way."""

from __future__ import annotations

from servelab.core.bench.contract import RunResult
from servelab.core.bench.record import BenchRunRecord
from servelab.core.bench.summary import summarize_level
from servelab.core.bench.upgrade import stored_level
from servelab.core.ledger.codec import encode
from servelab.core.load.clienthealth import ClientHealth
from servelab.core.load.metrics import run_metrics
from servelab.core.load.records import FailReason, RequestRecord


def _record(index: int, error: str | None) -> RequestRecord:
    r = RequestRecord(index=index, scheduled_ns=1_000_000 * index, input_tokens=16)
    r.sent_ns = r.scheduled_ns + 1000
    r.end_ns = r.sent_ns + 20_000_000
    if error is None:
        r.status, r.output_tokens = 200, 2
        r.event_ns, r.event_tokens = [r.sent_ns + 5_000_000, r.sent_ns + 9_000_000], [1, 1]
    else:
        r.error = error
    return r


def _run() -> RunResult:
    """Two answered, one HTTP 500, two cut by the deadline and one by a stop."""
    errors = [None, None, "http 500", FailReason.DEADLINE.value, FailReason.DEADLINE.value,
              FailReason.INTERRUPTED.value]  # fmt: skip
    records = [_record(i, e) for i, e in enumerate(errors)]
    client = ClientHealth(0.01, 0.1, 0.01, 1.0, 1.0, 0.1, False, ())
    return RunResult(4, 0, records, run_metrics(records, concurrency=4), client)


def test_a_level_counts_its_cut_requests_apart_from_its_failures() -> None:
    run = _run()
    level = summarize_level(4, [run])
    assert (level.n_requests, level.n_ok, level.n_cut, level.failed) == (6, 2, 3, 1)
    assert dict(level.failures) == {"http 500": 1}
    assert (level.failed, level.n_cut) == (run.metrics.n_failed, run.metrics.n_cut)
    doc = encode(level)
    assert (doc["failed"], doc["cut"], doc["failures"]) == (1, 3, {"http 500": 1})


def test_a_level_stored_before_its_cut_reads_its_cut_requests_apart() -> None:
    today = encode(summarize_level(4, [_run()]))
    assert isinstance(today, dict)
    old = {k: v for k, v in today.items() if k not in ("cut", "failed")}
    old["failures"] = {"run deadline": 2, "http 500": 1, "interrupted": 1}
    level = stored_level(BenchRunRecord(1, "2026-12-01T00:00:00Z", None, {}, {"level": old}))
    assert level is not None
    assert (level.n_cut, level.failed, dict(level.failures)) == (3, 1, {"http 500": 1})
    assert encode(level) == today


def test_a_stored_level_with_its_cut_is_read_as_it_is() -> None:
    today = encode(summarize_level(4, [_run()]))
    level = stored_level(BenchRunRecord(1, "2026-12-01T00:00:00Z", None, {}, {"level": today}))
    assert level is not None and encode(level) == today
