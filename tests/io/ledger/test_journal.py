"""The A/B journal in a real SQLite ledger: sessions, visits kept in plan order, status."""

from __future__ import annotations

from pathlib import Path

from servelab.io.ledger.journal import FINISHED, INTERRUPTED, RUNNING, AbJournal
from servelab.io.ledger.ledger import Ledger


def test_sessions_and_visits_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(path) as ledger:
        journal = AbJournal(ledger)
        sid = journal.start(service="decode", knob="K", config={"repeat": 2}, original="512")
        journal.add_visit(sid, 1, {"arm": "512", "round": 0})
        journal.add_visit(sid, 0, {"arm": "256", "round": 0})
        journal.set_status(sid, INTERRUPTED)
        other = journal.start(service="decode", knob="K", config={}, original=None)
    with Ledger.open(path) as ledger:
        journal = AbJournal(ledger)  # the tables exist already: created once, kept
        session = journal.get(sid)
        assert session is not None
        assert (session.service, session.knob, session.original) == ("decode", "K", "512")
        assert session.status == INTERRUPTED and session.config == {"repeat": 2}
        assert [v["arm"] for v in session.visits] == ["256", "512"]
        journal.set_status(sid, FINISHED, ab_id=7)
        done = journal.get(sid)
        assert done is not None and (done.status, done.ab_id) == (FINISHED, 7)
        fresh = journal.get(other)
        assert fresh is not None and fresh.status == RUNNING and fresh.original is None
        assert journal.get(999) is None
