"""The A/B journal in a real SQLite ledger: sessions, visits kept in plan order, status; and a
journal written before the codec, resumed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from servelab.core.ab.result import ArmVisit
from servelab.core.ledger.codec import encode
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from tests.support.old_rows import AB_SESSION_BEFORE_CODEC, AB_VISITS_BEFORE_CODEC


def test_sessions_and_visits_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    second = ArmVisit("512", 0, 2, "512", {64: 113.0}, 0, (4, 5), 1, "256→512", 3.5, {64: 20.0})
    with Ledger.open(path) as ledger:
        journal = AbJournal(ledger)
        sid = journal.start(service="decode", knob="K", config={"repeat": 2}, original="512")
        journal.add_visit(sid, 1, second)
        journal.add_visit(sid, 0, ArmVisit("256", 0, 1, "256", {64: 100.0}, 0))
        journal.set_status(sid, SessionStatus.INTERRUPTED)
        other = journal.start(service="decode", knob="K", config={}, original=None)
    with Ledger.open(path) as ledger:
        journal = AbJournal(ledger)  # the tables exist already: created once, kept
        session = journal.get(sid)
        assert session is not None
        assert (session.service, session.knob, session.original) == ("decode", "K", "512")
        assert session.status == SessionStatus.INTERRUPTED and session.config == {"repeat": 2}
        assert [v.arm for v in session.visits] == ["256", "512"]
        assert session.visits[1] == second
        journal.set_status(sid, SessionStatus.FINISHED, ab_id=7)
        done = journal.get(sid)
        assert done is not None and (done.status, done.ab_id) == (SessionStatus.FINISHED, 7)
        fresh = journal.get(other)
        assert fresh is not None and fresh.status == SessionStatus.RUNNING
        assert fresh.original is None
        assert journal.get(999) is None


def test_a_journal_written_before_the_codec_resumes(tmp_path: Path) -> None:
    """The session and visits as servelab 0d7d9ad wrote them: each visit reads as an ArmVisit,
    and written again is the same JSON (its config: tests/ops/ab/test_ab.py)."""
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        AbJournal(ledger)  # creates the journal's tables
    raw = sqlite3.connect(path, isolation_level=None)
    row = AB_SESSION_BEFORE_CODEC
    raw.execute(
        "INSERT INTO ab_sessions (service, knob, config, original, status) VALUES (?, ?, ?, ?, ?)",
        (row["service"], row["knob"], row["config"], row["original"], row["status"]),
    )
    for visit in AB_VISITS_BEFORE_CODEC:
        raw.execute(
            "INSERT INTO ab_visits (session_id, position, visit) VALUES (1, ?, ?)",
            (visit["position"], visit["visit"]),
        )
    raw.close()
    with Ledger.open(path) as ledger:
        session = AbJournal(ledger).get(1)
    assert session is not None and session.status == SessionStatus.INTERRUPTED
    assert session.config == json.loads(row["config"])
    assert [(v.arm, v.round, v.position) for v in session.visits] == [
        ("256", 0, 0), ("512", 0, 1), ("512", 1, 2)
    ]  # fmt: skip
    assert session.visits[0].order == "256→512" and session.visits[0].throughput[96] == 1837.0
    assert [encode(v) for v in session.visits] == [
        json.loads(v["visit"]) for v in AB_VISITS_BEFORE_CODEC
    ]
