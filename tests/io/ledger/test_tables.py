"""The generic store: one table description per record type, ``add``/``get``/``list`` for all."""

from __future__ import annotations

import dataclasses
import sqlite3
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseEvent, CaseEvidence, CaseExport, CaseRecord, Suspect
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.export import LedgerExport
from servelab.core.soak.record import SoakRunRecord
from servelab.core.verify.checks import Check
from servelab.core.verify.record import VerificationRecord
from servelab.errors import CaseError
from servelab.io.ledger import tables
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW, TABLES, table_of

AT = "2026-09-21T14:13:20.000Z"


def _clock() -> float:
    return 1_790_000_000.0  # AT


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db", clock=_clock) as opened:
        yield opened


def _raw(ledger: Ledger, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(ledger.path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _element(hint: object) -> type:
    """A record type out of ``tuple[X, ...]`` or ``tuple[Annotated[X, ...], ...]``."""
    inner = typing.get_args(hint)[0]
    found = typing.get_args(inner)[0] if typing.get_origin(inner) is typing.Annotated else inner
    assert isinstance(found, type)
    return found


def test_public_api() -> None:
    assert all(hasattr(tables, name) for name in tables.__all__)


def test_every_record_the_export_holds_has_a_table() -> None:
    hints = typing.get_type_hints(LedgerExport, include_extras=True)
    kinds = {_element(hints[f.name]) for f in dataclasses.fields(LedgerExport)
             if f.name not in {"schema_version", "path"}}  # fmt: skip
    case_hints = typing.get_type_hints(CaseExport, include_extras=True)
    kinds |= {_element(case_hints[name]) for name in ("suspects", "evidence", "events")}
    kinds = {CaseRecord if kind is CaseExport else kind for kind in kinds}
    assert kinds == set(TABLES)


def test_each_table_and_its_filters_are_in_the_schema(ledger: Ledger) -> None:
    for table in TABLES.values():
        assert table.name in ledger.table_names()
        columns = set(ledger.table_columns(table.name))
        assert table.filters <= columns, table.name
        assert {f.name for f in dataclasses.fields(table.kind)} & columns >= {"id", "at"}


def test_a_record_is_written_as_the_old_writers_wrote_it(ledger: Ledger) -> None:
    dep = ledger.add(DeploymentRecord(0, NOW, "pd", "h", "up", {"b": 1, "a": [1, 2]}))
    knob = ledger.add(KnobChangeRecord(0, NOW, "decode", "K", new="512", reason="ab"))
    case = ledger.add(CaseRecord(0, NOW, "hang", "open"))
    suspect = ledger.add(Suspect("component:proxy", "stalls", NOW, case_id=case))
    event = ledger.add(CaseEvent("revert", NOW, {"ok": True}, case_id=case))
    assert (dep, knob, case, suspect, event) == (1, 1, 1, 1, 1)
    assert _raw(ledger, "SELECT * FROM deployments") == [
        (1, AT, "pd", "h", "up", '{"a":[1,2],"b":1}')
    ]
    assert _raw(ledger, "SELECT * FROM knob_changes") == [
        (1, AT, "decode", "K", None, "512", "ab", None, None, None)
    ]
    assert _raw(ledger, "SELECT * FROM cases") == [(1, AT, "hang", "open", None, None)]
    assert _raw(ledger, "SELECT * FROM case_suspects") == [
        (1, 1, AT, "component:proxy", "stalls", None, None)
    ]
    assert _raw(ledger, "SELECT * FROM case_events") == [(1, 1, AT, "revert", '{"ok":true}')]


def test_an_at_given_is_kept_and_the_id_given_is_not(ledger: Ledger) -> None:
    first = ledger.add(DeploymentRecord(7, "2020-01-01T00:00:00.000Z", "pd", None, "down"))
    assert ledger.get(DeploymentRecord, first) == DeploymentRecord(
        first, "2020-01-01T00:00:00.000Z", "pd", None, "down"
    )
    assert ledger.get(DeploymentRecord, 7) is None


def test_get_and_list_read_every_kind_typed(ledger: Ledger) -> None:
    case = ledger.add(CaseRecord(0, NOW, "hang", "open"))
    for service in ("decode", "prefill", "decode"):
        ledger.add(KnobChangeRecord(0, NOW, service, "K", new="1", case_id=case))
    ledger.add(KnobChangeRecord(0, NOW, "decode", "K", new="2"))
    ledger.add(CaseEvidence("note", None, "fresh connections work", NOW, case_id=case))
    assert [c.id for c in ledger.list(KnobChangeRecord, service="decode")] == [1, 3, 4]
    assert [c.id for c in ledger.list(KnobChangeRecord, service="decode", case_id=case)] == [1, 3]
    assert [c.id for c in ledger.list(KnobChangeRecord, service=None)] == [1, 2, 3, 4]
    assert ledger.list(CaseEvidence, case_id=case) == [
        CaseEvidence("note", None, "fresh connections work", AT, 1, case)
    ]
    assert ledger.list(CaseEvidence, case_id=case + 1) == []
    assert ledger.get(CaseRecord, case) == CaseRecord(case, AT, "hang", "open")
    assert ledger.get(SoakRunRecord, 1) is None and ledger.list(VerificationRecord) == []


def test_a_type_the_ledger_does_not_store_is_refused(ledger: Ledger) -> None:
    with pytest.raises(TypeError, match="stores no Check"):
        ledger.list(Check)
    with pytest.raises(TypeError, match="stores no CaseExport"):
        table_of(CaseExport)
    with pytest.raises(TypeError, match="case_suspects are not filtered by target"):
        ledger.list(Suspect, target="component:proxy")
    with pytest.raises(TypeError, match="stores no str"):
        ledger.add("a row")


def test_a_lookalike_of_a_heavy_record_is_refused() -> None:
    """The heavy records' tables are found by the type's module and name, then by the type
    itself: a class of the same name elsewhere (or made to look like one) has no table."""
    lookalike = type("VerificationRecord", (), {"__module__": "servelab.core.verify.record"})
    with pytest.raises(TypeError, match="stores no VerificationRecord"):
        table_of(lookalike)
    with pytest.raises(TypeError, match="stores no"):
        table_of(42)  # type: ignore[arg-type]
    assert table_of(VerificationRecord).name == "verifications"


def test_a_tables_rule_is_checked_in_the_write(ledger: Ledger) -> None:
    with pytest.raises(CaseError, match=r"no case 3 in .*ledger\.db"):
        ledger.add(CaseEvent("revert", NOW, {}, case_id=3))
    case = ledger.add(CaseRecord(0, NOW, "hang", "open"))
    with pytest.raises(CaseError, match="unknown evidence kind 'rumour'"):
        ledger.add(CaseEvidence("rumour", None, None, NOW, case_id=case))
    ledger.add(Suspect("component:proxy", None, NOW, case_id=case))
    with pytest.raises(CaseError, match="already a suspect"):
        ledger.add(Suspect("component:proxy", "again", NOW, case_id=case))
    assert _raw(ledger, "SELECT count(*) FROM case_events") == [(0,)]
    assert _raw(ledger, "SELECT count(*) FROM case_suspects") == [(1,)]
