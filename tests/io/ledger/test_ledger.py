"""The ledger against real SQLite files: round trips, migrations, crashes and concurrent writers."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbArm, AbResult
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord, Suspect
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.export import LedgerExport
from servelab.core.soak.finding import Finding
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.core.telemetry.layers import Layer
from servelab.core.verify.checks import Check, CheckCode, KnobLive
from servelab.core.verify.e2e import WorkerReach
from servelab.core.verify.record import StoredCheck, UntypedCheck, VerificationRecord, read_check
from servelab.errors import CaseError, RecordError, SchemaError, StoreError
from servelab.io.ledger import connection as connection_module
from servelab.io.ledger import ledger as store_module
from servelab.io.ledger.connection import default_ledger_path, resolve_ledger_path
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.migrations import SCHEMA_VERSION, migrate
from servelab.io.ledger.tables import NOW
from tests.support.old_rows import FIRST_AB_RUN

#: an A/B with nothing measured
EMPTY_AB = AbResult("decode", "K", "256", "512")


def _fixed_clock() -> float:
    return 1_790_000_000.0


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = Ledger.open(tmp_path / "state" / "ledger.db", clock=_fixed_clock)
    yield opened
    opened.close()


def test_public_api() -> None:
    assert "Ledger" in store_module.__all__
    assert {"default_ledger_path", "resolve_ledger_path"} <= set(connection_module.__all__)


def test_open_creates_wal_ledger_at_latest_schema(ledger: Ledger) -> None:
    assert ledger.path.is_file()
    assert ledger.schema_version == SCHEMA_VERSION
    raw = sqlite3.connect(ledger.path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        raw.close()


def test_measurement_round_trips(ledger: Ledger) -> None:
    dep = ledger.add(
        DeploymentRecord(id=0, at=NOW, name="pd", spec_hash="abc", action="up", detail={"n": 3})
    )
    knob = ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service="decode",
            name="K",
            old="512",
            new="256",
            reason="hang",
            case_id=None,
            backup_path="/b",
        )
    )
    ver = ledger.record_verification(
        spec_hash="abc",
        ok=False,
        checks=[UntypedCheck("live", "decode", False, "differs", {"x": 1})],
    )
    run = ledger.record_bench_run(
        label="c64",
        config={"c": [64]},
        summary={"64": {"tok_s": 1.5}},
        records=[{"i": i} for i in range(5)],
    )
    ab = ledger.record_ab(config={"r": 3}, result=EMPTY_AB)
    soak = ledger.record_soak(
        SoakResult(
            SoakConfig(sessions=4),
            Targets("http://e"),
            findings=(Finding(Layer.CLIENT_PROXY, 0.9, ("a",), ()),),
        )
    )
    dep_row = ledger.get(DeploymentRecord, dep)
    assert dep_row is not None and dep_row.detail == {"n": 3}
    change = ledger.get(KnobChangeRecord, knob)
    assert change is not None and change.old == "512"
    assert change.at == "2026-09-21T14:13:20.000Z"
    verification = ledger.get(VerificationRecord, ver)
    assert verification is not None
    assert [encode(c, StoredCheck) for c in verification.checks] == [
        {"layer": "live", "service": "decode", "ok": False, "code": None, "detail": "differs",
         "x": 1}
    ]  # fmt: skip
    got = ledger.get(BenchRunRecord, run)
    assert got is not None and got.records is not None
    assert got.n_records == 5 and got.records[4] == {"i": 4}
    assert ledger.list(BenchRunRecord)[0].records is None
    ab_row = ledger.get(AbRunRecord, ab)
    assert ab_row is not None and ab_row.result.arms == ()
    assert ledger.list(AbRunRecord, service="decode", knob="K")[0].id == ab
    assert ledger.list(AbRunRecord, knob="other") == []
    soak_row = ledger.get(SoakRunRecord, soak)
    assert soak_row is not None
    assert soak_row.ok is False and soak_row.result.findings[0].layer == "client_proxy"
    assert ledger.get(BenchRunRecord, 999) is None


def test_a_check_stores_its_code_and_an_older_row_its_sentence(ledger: Ledger) -> None:
    restart = KnobLive(42, "pid record", "K", "512", None, LiveVerdict.RESTART_NEEDED)
    coded = Check("decode", False, CheckCode.LIVE_RESTART_NEEDED, restart)
    older = UntypedCheck("live", "decode", False, "in file but not live: restart needed", {})
    vid = ledger.record_verification(spec_hash="h", ok=False, checks=[coded, older])
    got = ledger.get(VerificationRecord, vid)
    assert got is not None and got.checks == (coded, older)
    raw = sqlite3.connect(ledger.path)
    try:
        stored = raw.execute("SELECT detail, data FROM verification_checks ORDER BY id").fetchall()
    finally:
        raw.close()
    assert [detail for detail, _data in stored] == [
        "live.restart_needed", "in file but not live: restart needed"
    ]  # fmt: skip
    assert [json.loads(data) for _detail, data in stored] == [encode(restart), {}]


def test_a_check_row_written_before_the_typed_data_reads_typed(ledger: Ledger) -> None:
    """Rows as servelab wrote them before: the code in ``detail``, the data as a plain JSON dict."""
    vid = ledger.record_verification(spec_hash="h", ok=True, checks=[])
    data = {"requests_sent": 3, "role": "decode", "served_after": 5, "served_before": 4,
            "statuses": [200, 200, 200], "via": "router"}  # fmt: skip
    raw = sqlite3.connect(ledger.path)
    try:
        with raw:
            raw.execute(
                "INSERT INTO verification_checks (verification_id, layer, service, ok, detail, "
                "data) VALUES (?, 'e2e', 'decode-1', 1, 'e2e.worker_reached', ?)",
                (vid, json.dumps(data)),
            )
    finally:
        raw.close()
    got = ledger.get(VerificationRecord, vid)
    reach = WorkerReach("decode", "router", 4, 5, 3, (200, 200, 200))
    assert got is not None
    assert got.checks == (Check("decode-1", True, CheckCode.E2E_WORKER_REACHED, reach),)


def test_case_writers_and_verdicts(ledger: Ledger) -> None:
    cid = ledger.add(CaseRecord(id=0, at=NOW, title="agentic sessions hang", status="open"))
    ledger.add(Suspect(at=NOW, case_id=cid, target="knob:decode/K", reason="latest change"))
    with pytest.raises(CaseError, match="already a suspect"):
        ledger.add(Suspect(at=NOW, case_id=cid, target="knob:decode/K", reason=None))
    ledger.add(
        CaseEvidence(at=NOW, case_id=cid, kind="note", ref_id=None, note="fresh connections work")
    )
    with pytest.raises(CaseError, match="evidence kind"):
        ledger.add(CaseEvidence(at=NOW, case_id=cid, kind="rumour", ref_id=None, note=None))
    with pytest.raises(CaseError, match="no case 99"):
        ledger.add(CaseEvent(at=NOW, case_id=99, kind="x", detail={}))
    ledger.resolve_case(
        case_id=cid,
        root_cause="proxy",
        verdicts={"knob:decode/K": "exonerated", "component:proxy": "convicted"},
    )
    suspects = {s.target: s.verdict for s in ledger.list(Suspect, case_id=cid)}
    assert suspects == {"knob:decode/K": "exonerated", "component:proxy": "convicted"}
    case = ledger.get(CaseRecord, cid)
    assert case is not None and case.status == "resolved"
    with pytest.raises(CaseError, match="verdict"):
        ledger.resolve_case(case_id=cid, root_cause="x", verdicts={"a": "maybe"})
    case = ledger.get(CaseRecord, cid)
    assert case is not None and case.root_cause == "proxy"  # the failed resolve changed nothing


def test_value_that_is_not_json_is_refused_and_nothing_written(ledger: Ledger) -> None:
    with pytest.raises(StoreError, match="not JSON"):
        ledger.record_ab(config={"x": object()}, result=EMPTY_AB)
    assert ledger.list(AbRunRecord) == []


def test_export_holds_every_table(ledger: Ledger) -> None:
    ledger.record_bench_run(label=None, config={}, summary={}, records=[{"a": 1}])
    cid = ledger.add(CaseRecord(id=0, at=NOW, title="t", status="open"))
    ledger.add(CaseEvent(at=NOW, case_id=cid, kind="revert", detail={"knob": "K"}))
    dump = ledger.export()
    assert dump["schema_version"] == SCHEMA_VERSION
    assert dump["bench_runs"][0]["records"] == [{"a": 1}]
    assert dump["cases"][0]["events"][0]["detail"] == {"knob": "K"}
    assert {"deployments", "knob_changes", "verifications", "ab_runs", "soak_runs"} <= set(dump)


def test_newer_schema_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 4}")
    raw.close()
    with pytest.raises(SchemaError, match=r"newer than this servelab supports") as info:
        Ledger.open(path)
    assert str(SCHEMA_VERSION + 4) in str(info.value) and str(path) in str(info.value)


def test_older_schema_is_migrated_keeping_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path), upto=1)
    raw.execute(
        "INSERT INTO ab_runs (at, service, knob, config, result) VALUES ('t', 'd', 'K', '{}', '{}')"
    )
    raw.execute("COMMIT")
    raw.close()
    with Ledger.open(path) as ledger:
        assert ledger.schema_version == SCHEMA_VERSION
        assert [r.knob for r in ledger.list(AbRunRecord)] == ["K"]
        assert ledger.add(CaseRecord(id=0, at=NOW, title="after migration", status="open")) == 1


def test_open_without_create_refuses_a_missing_ledger_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "dir" / "ledger.db"
    with pytest.raises(StoreError, match=r"no ledger at .*ledger.db") as info:
        Ledger.open(missing, create=False)
    assert str(missing) in str(info.value)
    assert list(tmp_path.iterdir()) == []
    with Ledger.open(tmp_path / "l.db") as ledger:
        ledger.add(CaseRecord(id=0, at=NOW, title="kept", status="open"))
    with Ledger.open(tmp_path / "l.db", create=False) as ledger:
        assert [c.title for c in ledger.list(CaseRecord)] == ["kept"]


def test_a_file_that_is_not_a_ledger_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match=r"not a usable ledger|cannot start a write"):
        Ledger.open(path)


def test_ledger_path_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVELAB_LEDGER", raising=False)
    assert default_ledger_path(tmp_path) == tmp_path / "ledger.db"
    monkeypatch.setenv("SERVELAB_LEDGER", str(tmp_path / "moved.db"))
    assert default_ledger_path(tmp_path) == tmp_path / "moved.db"
    assert resolve_ledger_path(tmp_path / "opt.db", tmp_path) == tmp_path / "opt.db"


_WRITER = textwrap.dedent(
    """
    import sys
    import time
    from pathlib import Path
    from servelab.core.knobs.record import KnobChangeRecord
    from servelab.io.ledger.ledger import Ledger
    from servelab.io.ledger.tables import NOW
    path, tag, count, n_rec = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with Ledger.open(path) as ledger:
        print("ready", flush=True)
        sys.stdin.readline()  # the parent starts every writer at once
        for i in range(count):
            recs = [{"tag": tag, "i": i, "seq": j, "pad": "x" * 200} for j in range(n_rec)]
            ledger.record_bench_run(label=f"{tag}-{i}", config={}, summary={}, records=recs)
            ledger.add(KnobChangeRecord(id=0, at=NOW, service=tag, name="K", new=str(i)))
            time.sleep(0.002)  # real writers pause between runs (SQLite's busy wait is unfair)
    print("done", flush=True)
    """
)


def _spawn_writer(path: Path, tag: str, count: int, n_rec: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), tag, str(count), str(n_rec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _assert_runs_whole(ledger: Ledger) -> None:
    raw = sqlite3.connect(ledger.path)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for run in ledger.list(BenchRunRecord):
            (n,) = raw.execute(
                "SELECT count(*) FROM bench_records WHERE run_id = ?", (run.id,)
            ).fetchone()
            assert n == run.n_records, run.label
    finally:
        raw.close()


_KILLED_BENCH = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from servelab.io.ledger.ledger import Ledger
    with Ledger.open(Path(sys.argv[1])) as ledger:
        for i in range(3):
            recs = [{"i": i, "seq": j} for j in range(500)]
            ledger.record_bench_run(label=f"k-{i}", config={}, summary={}, records=recs)
        big = [{"seq": j, "pad": "x" * 200} for j in range(400_000)]
        print("writing", flush=True)
        ledger.record_bench_run(label="big", config={}, summary={}, records=big)
        print("committed", flush=True)
    """
)


def test_kill_9_mid_bench_leaves_every_earlier_run_intact(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger.open(path).close()
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_BENCH, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "writing"
        wal = path.with_name(path.name + "-wal")  # holds the 3 committed runs; never shrinks
        size_at_start = wal.stat().st_size
        deadline = time.monotonic() + 60
        while wal.stat().st_size <= size_at_start:  # the 400k-record transaction spills pages
            assert time.monotonic() < deadline and child.poll() is None, "never wrote the WAL"
            time.sleep(0.01)
    finally:
        child.kill()
        child.wait(timeout=10)
        rest = child.stdout.read() if child.stdout is not None else ""
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -9 and "committed" not in rest
    with Ledger.open(path) as ledger:
        labels = [r.label for r in ledger.list(BenchRunRecord)]
        assert labels == ["k-0", "k-1", "k-2"]
        _assert_runs_whole(ledger)
        assert ledger.record_ab(config={}, result=EMPTY_AB) == 1


def test_two_processes_writing_at_once_corrupt_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    writers = [_spawn_writer(path, tag, count=150, n_rec=50) for tag in ("a", "b")]
    for proc in writers:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in writers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in writers:
        out, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0 and out.strip() == "done", out
    with Ledger.open(path) as ledger:
        runs = ledger.list(BenchRunRecord)
        assert len(runs) == 300 and len({r.id for r in runs}) == 300
        tags = "".join(str(r.label)[0] for r in runs)
        assert tags.count("ab") + tags.count("ba") >= 2, "the writers did not overlap"
        for tag in ("a", "b"):
            news = [c.new for c in ledger.list(KnobChangeRecord, service=tag)]
            assert news == [str(i) for i in range(150)]
        _assert_runs_whole(ledger)


# -- typed records through a real file ----------------------------------------------------------

AT = "2026-09-21T14:13:20.000Z"  # _fixed_clock


def test_typed_records_round_trip_through_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "typed.db"
    result = AbResult(
        service="decode", knob="K", baseline="256", candidate="512", restored=True,
        arms=(AbArm("256", (1,), {64: (100.0, 101.0)}), AbArm("512", (2,), {64: (113.0,)})),
        comparisons=(Comparison(64, 1.128, (1.1, 1.16), Verdict.BETTER, "256", "512", 0.95,
                                "welch"),),
    )  # fmt: skip
    finding = Finding(Layer.CLIENT_PROXY, 0.9, ("stalls",), ())
    config = SoakConfig(knobs={"decode/K": "512"})
    doc = SoakResult(config, Targets("http://e"), findings=(finding,))
    check = {"layer": "live", "service": "decode", "ok": True, "detail": "live", "knob": "K"}
    with Ledger.open(path, clock=_fixed_clock) as ledger:
        ledger.add(
            DeploymentRecord(id=0, at=NOW, name="pd", spec_hash="h", action="up", detail={"n": 1})
        )
        ledger.add(
            KnobChangeRecord(
                id=0, at=NOW, service="decode", name="K", old="256", new="512", reason="ab"
            )
        )
        ledger.record_verification(spec_hash="h", ok=True, checks=[read_check(check)])
        ledger.record_bench_run(label="x", config={"c": 1}, summary={"s": 2}, records=[{"i": 0}])
        ledger.record_ab(config={"repeats": 1}, result=result)
        ledger.record_soak(doc)
        cid = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        ledger.add(Suspect(at=NOW, case_id=cid, target="knob:decode/K", reason="latest"))
        ledger.add(CaseEvidence(at=NOW, case_id=cid, kind="soak", ref_id=1, note="proxy"))
        ledger.add(CaseEvent(at=NOW, case_id=cid, kind="revert", detail={"knob": "K", "ok": True}))
    with Ledger.open(path, clock=_fixed_clock) as ledger:
        assert ledger.list(DeploymentRecord) == [DeploymentRecord(1, AT, "pd", "h", "up", {"n": 1})]
        assert ledger.list(KnobChangeRecord) == [
            KnobChangeRecord(1, AT, "decode", "K", "256", "512", "ab", None, None)
        ]
        assert ledger.list(VerificationRecord) == [
            VerificationRecord(1, AT, "h", True, (read_check(check),))
        ]
        assert ledger.get(BenchRunRecord, 1) == BenchRunRecord(1, AT, "x", {"c": 1}, {"s": 2}, 1,
                                                         ({"i": 0},))  # fmt: skip
        assert ledger.get(AbRunRecord, 1) == AbRunRecord(
            1, AT, "decode", "K", {"repeats": 1}, result
        )
        assert ledger.get(SoakRunRecord, 1) == SoakRunRecord(1, AT, False, doc)
        assert ledger.get(CaseRecord, cid) == CaseRecord(cid, AT, "hang", "open")
        assert ledger.list(Suspect, case_id=cid) == [Suspect("knob:decode/K", "latest", AT, id=1,
                                                     case_id=cid)]  # fmt: skip
        assert ledger.list(CaseEvidence, case_id=cid) == [
            CaseEvidence("soak", 1, "proxy", AT, id=1, case_id=cid)
        ]
        assert ledger.list(CaseEvent, case_id=cid) == [
            CaseEvent("revert", AT, {"knob": "K", "ok": True}, id=1, case_id=cid)
        ]
        snapshot = ledger.snapshot()
        assert ledger.export() == encode(snapshot)
        assert decode(LedgerExport, ledger.export()) == snapshot


def test_an_older_ledger_with_duplicated_fields_is_read_typed(tmp_path: Path) -> None:
    """Rows written in the old shape: the first ``servelab ab``'s row (arms with label and value,
    as that servelab wrote it), events with ok and verified."""
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path))
    raw.execute(
        "INSERT INTO ab_runs (at, service, knob, config, result) VALUES (?, ?, ?, ?, ?)",
        (AT, *(FIRST_AB_RUN[k] for k in ("service", "knob", "config", "result"))),
    )
    raw.execute("INSERT INTO cases (at, title) VALUES (?, 'hang')", (AT,))
    for ok, verified in ((True, True), (True, False)):
        detail = {"knob": "K", "service": "decode", "ok": ok, "verified": verified}
        raw.execute(
            "INSERT INTO case_events (case_id, at, kind, detail) VALUES (1, ?, 'restore', ?)",
            (AT, json.dumps(detail)),
        )
    raw.execute("COMMIT")
    raw.close()
    with Ledger.open(path) as ledger:
        ab = ledger.get(AbRunRecord, 1)
        assert ab is not None and [a.value for a in ab.result.arms] == ["256", "512"]
        events = ledger.list(CaseEvent, case_id=1)
        assert [e.ok for e in events] == [True, False]
        export = ledger.export()
    # (the config keeps its bench's own ``label``: only the arms' is gone)
    assert '"label"' not in json.dumps(export["ab_runs"][0]["result"])
    assert '"verified"' not in json.dumps(export)


_OLDER_SOAKS = Path(__file__).parents[2] / "core" / "soak" / "data" / "older_soaks.json"


def test_an_older_soak_row_reads_typed_from_the_file_and_its_export(tmp_path: Path) -> None:
    """A soak row and its findings as an older servelab stored them (worded findings, the
    observations' ``data``), columns as written: the ledger reads it typed, its export reads
    back the same, and a soak run without its id is a RecordError naming it."""
    (row, *_) = json.loads(_OLDER_SOAKS.read_text())["rows"]
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")
    migrate(raw, source=str(path))
    raw.execute(
        "INSERT INTO soak_runs (id, at, ok, config, result) VALUES (?, ?, ?, ?, ?)",
        tuple(row[k] for k in ("id", "at", "ok", "config", "result")),
    )
    for text in row["findings"]:
        finding = json.loads(text)
        raw.execute(
            "INSERT INTO soak_findings (soak_id, layer, confidence, finding) VALUES (?, ?, ?, ?)",
            (row["id"], finding["layer"], finding["confidence"], text),
        )
    raw.execute("COMMIT")
    raw.close()
    with Ledger.open(path) as ledger:
        soak = ledger.get(SoakRunRecord, row["id"])
        export = ledger.export()
    assert soak is not None and (soak.id, soak.at, soak.ok) == (row["id"], row["at"], False)
    assert [f.layer for f in soak.result.findings] == [
        json.loads(f)["layer"] for f in row["findings"]
    ]
    assert soak.result.config.knobs == json.loads(row["config"])["knobs"]
    assert len(soak.result.observations) == len(json.loads(row["result"])["observations"])
    (again,) = decode(LedgerExport, export).soak_runs
    assert again == soak
    with pytest.raises(RecordError, match="id"):
        decode(LedgerExport, {**export, "soak_runs": [{"at": row["at"], "result": {}}]})


def _soak_doc(ok: bool, layers: list[str]) -> SoakResult:
    """A soak that passed (no finding) or failed with a finding of each layer."""
    assert ok is not bool(layers)
    findings = tuple(Finding(Layer(layer), 0.9, (), ()) for layer in layers)
    return SoakResult(SoakConfig(knobs={"decode/K": "512"}), Targets("http://e"), findings=findings)


def test_record_soak_writes_the_row_and_its_findings(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        soak_id = ledger.record_soak(_soak_doc(False, ["client_proxy"]))
        row = ledger.get(SoakRunRecord, soak_id)
        assert (
            ledger.list(
                CaseEvidence, case_id=ledger.add(CaseRecord(id=0, at=NOW, title="t", status="open"))
            )
            == []
        )
    assert row is not None
    assert row.ok is False
    assert row.result.config == SoakConfig(knobs={"decode/K": "512"})
    assert [f.layer for f in row.result.findings] == ["client_proxy"]
    raw = sqlite3.connect(tmp_path / "l.db")
    ((layer, confidence, finding),) = raw.execute(
        "SELECT layer, confidence, finding FROM soak_findings"
    ).fetchall()
    raw.close()
    assert (layer, confidence) == ("client_proxy", 0.9)
    assert json.loads(finding) == {  # codes and ids: the words are rendered, never stored
        "layer": "client_proxy", "confidence": 0.9, "supporting": [], "contradicting": [],
        "worker": None,
    }  # fmt: skip


def test_record_soak_attaches_it_to_the_case(tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "l.db") as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        failing = ledger.record_soak(_soak_doc(False, ["client_proxy", "router"]), case_id=case_id)
        clean = ledger.record_soak(_soak_doc(True, []), case_id=case_id)
        evidence = ledger.list(CaseEvidence, case_id=case_id)
        with pytest.raises(CaseError):
            ledger.record_soak(_soak_doc(True, []), case_id=case_id + 99)
        assert len(ledger.list(SoakRunRecord)) == 2  # the refused one left no row
    assert [(e.kind, e.ref_id, e.note) for e in evidence] == [
        ("soak", failing, "client_proxy, router"),
        ("soak", clean, "no finding"),
    ]


def test_an_id_sqlite_cannot_hold_names_no_record(tmp_path: Path) -> None:
    # `case show 99999999999999999999` ended in "unexpected OverflowError": no row holds it
    from servelab.core.deploy.record import DeploymentRecord
    from servelab.io.ledger.ledger import Ledger

    with Ledger.open(tmp_path / "l.db") as ledger:
        assert ledger.get(DeploymentRecord, 10**20) is None
        assert ledger.get(DeploymentRecord, -(10**20)) is None
        assert ledger.list(DeploymentRecord) == []
