"""One failed request of each reason per bench level, quoted beside the count on stderr: what a
"1 malformed stream" was (the request's own detail: the event's data, an engine's error body),
without opening the ledger. The detail is the record's (at most 300 characters, a token masked
when it was recorded); it is masked once more, every control character escaped, and cut to
:data:`SHOWN` characters here."""

from __future__ import annotations

from servelab.core.bench.contract import BenchResult
from servelab.core.load.metrics import CUT_REASONS
from servelab.core.load.records import RequestRecord
from servelab.core.printable import printable
from servelab.core.redaction import redact
from servelab.report.text import level_label

__all__ = ["SHOWN", "failure_examples"]

#: The most characters of a failure's detail shown on its line.
SHOWN = 160


def failure_examples(result: BenchResult) -> list[str]:
    """Per level, for each reason its requests failed for (not the run's end cutting them),
    the first such request and its detail: ``C256: e.g. request 310 (malformed stream): ...``."""
    lines = []
    for level in result.levels:
        first: dict[str, RequestRecord] = {}
        for run in result.runs:
            if run.concurrency != level.concurrency:
                continue
            for record in run.records:
                reason = record.error
                if reason is not None and reason not in CUT_REASONS:
                    first.setdefault(reason, record)
        for reason, record in first.items():
            lines.append(f"{level_label(level.concurrency)}: e.g. request {record.index} "
                         f"({reason}): {_detail(record.error_detail)}")  # fmt: skip
    return lines


def _detail(detail: str) -> str:
    shown = printable(redact(detail))
    if not shown:
        return "(no detail)"
    return shown if len(shown) <= SHOWN else shown[: SHOWN - 1] + "…"
