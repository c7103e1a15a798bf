"""What the ``servelab ledger`` CLI tests share (tests/cli/test_ledger_cli.py and
tests/cli/test_ledger_output_cli.py): a ledger seeded with :data:`RUNS` bench runs of
:data:`PER_RUN` request records each (enough for an export to span hundreds of write chunks),
one of them a case's evidence; and the CLI run that must succeed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from servelab.core.case.record import CaseEvidence, CaseRecord
from servelab.core.ledger.codec import encode
from servelab.core.load.records import RequestRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from tests.support import run_cli

__all__ = ["PER_RUN", "RUNS", "ok", "request_records", "seed"]

RUNS, PER_RUN = 3, 700


def request_records(n: int, run: int) -> list[dict[str, object]]:
    """Run ``run``'s first ``n`` request records, encoded as the ledger stores them."""
    out = []
    for i in range(n):
        sent = 10**14 + run * 10**10 + i * 10**6
        events = [sent + 10**8 + k * 2 * 10**7 + i for k in range(40)]
        out.append(encode(RequestRecord(
            index=i, scheduled_ns=sent - 500, sent_ns=sent, input_tokens=64,
            first_byte_ns=events[0], end_ns=events[-1] + 1, status=200, output_tokens=40,
            event_ns=events, event_tokens=[1] * 40,
        )))  # fmt: skip
    return out


def seed(path: Path) -> Path:
    """A ledger at ``path``: the runs, and a case whose evidence is run 1 (no -wal left)."""
    with Ledger.open(path) as ledger:
        for run in range(RUNS):
            ledger.record_bench_run(label=f"r{run}", config={"run": run}, summary={"ok": 1},
                                    records=request_records(PER_RUN, run))  # fmt: skip
        case = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        ledger.add(CaseEvidence(at=NOW, case_id=case, kind="run", ref_id=1, note=None))
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.db"]  # no -wal left
    return path


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    """``servelab ARGS`` as a real process, which must exit 0."""
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr + done.stdout
    return done
