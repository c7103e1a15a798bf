"""bench's stderr quotes one failed request of each reason per level beside the count (issue 38,
34th pass: "1 malformed stream" said nothing of what was malformed): its detail masked, every
control character escaped, cut; the run's end cutting requests is not a failure to quote."""

from __future__ import annotations

from servelab.core.bench.contract import BenchConfig, BenchResult, RunResult
from servelab.core.bench.summary import summarize_level
from servelab.core.load.clienthealth import client_health
from servelab.core.load.metrics import run_metrics
from servelab.core.load.records import REASON_DEADLINE, REASON_MALFORMED, RequestRecord
from servelab.report.failures import SHOWN, failure_examples

_SECRET = "sk-" + "Zq9" * 12
_CUT = "the stream ended inside an event (no blank line after it): "


def _record(index: int, error: str | None = None, detail: str = "") -> RequestRecord:
    record = RequestRecord(index=index, scheduled_ns=0, sent_ns=1, end_ns=2)
    if error is not None:
        record.fail(error, detail)
    return record


def _result(concurrency: int, records: list[RequestRecord]) -> BenchResult:
    health = client_health([], 0.0, 1.0, [])
    run = RunResult(concurrency, 0, records, run_metrics(records), health)
    level = summarize_level(concurrency, [run])
    return BenchResult(BenchConfig(url="r"), runs=[run], levels=[level])


def test_the_first_failed_request_of_each_reason_is_quoted_masked_escaped_and_cut() -> None:
    hostile = f"\x1b[2J{_SECRET} \u202e" + "x" * 400
    records = [
        _record(0),
        _record(1, REASON_DEADLINE, "the run deadline passed mid-request"),
        _record(7, REASON_MALFORMED, f"{_CUT}[DON"),
        _record(9, REASON_MALFORMED, "a later one"),
        _record(12, "http 500", hostile),
    ]  # fmt: skip
    lines = failure_examples(_result(256, records))
    assert lines[0] == ("C256: e.g. request 7 (malformed stream): the stream ended inside an "
                        "event (no blank line after it): [DON")  # fmt: skip
    assert lines[1].startswith("C256: e.g. request 12 (http 500): \\x1b[2J") and len(lines) == 2
    assert "Zq9Zq9" not in lines[1] and "\u202e" not in lines[1] and "\\u202e" in lines[1]
    assert lines[1].endswith("…") and len(lines[1].split("(http 500): ", 1)[1]) == SHOWN
    assert failure_examples(_result(4, [_record(0), _record(1)])) == []
    assert failure_examples(_result(4, [_record(3, "http 503")])) == [
        "C4: e.g. request 3 (http 503): (no detail)"
    ]
