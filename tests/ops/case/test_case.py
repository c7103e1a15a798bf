"""Cases against a real ledger file, and revert → resolve → restore against a real sim stack.

The stack is brought up by servelab itself (``ops.deploy.deploy.up``) from a spec on free loopback
ports: simulated prefill and decode, the real sglang-router. The decode's env file holds a secret
that must never reach the ledger.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from servelab.core.case.model import RESTORE_FAILED, RESTORE_PENDING, RESTORE_VERIFIED, EventOutcome
from servelab.core.case.record import CaseEvent
from servelab.core.deploy.topology import restart_plan
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode, encode
from servelab.core.telemetry.layers import Layer
from servelab.core.verify.arguments import ArgumentLive
from servelab.errors import CaseError, KnobError, SpecError
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.case.changes import find_changes
from servelab.report.case import case_json, event_error, revert_error
from tests.support import free_ports
from tests.support.history import K, seed_history
from tests.support.progress import lines
from tests.support.soakresult import failed_soak
from tests.support.specs import SECRET, write_pd_spec

OVERLAP = "--disable-overlap-schedule"


def _spec(root: Path) -> Path:
    """The PD stack (sim prefill + decode, the real router) with a secret in the decode's env."""
    return write_pd_spec(root, time_scale=0.02, secret=SECRET, name="ledger-e2e")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


# -- without a stack -------------------------------------------------------------------------


def test_case_lifecycle_in_the_ledger(ledger: Ledger) -> None:
    cid = cases.open_case(ledger, "  agentic sessions hang ")
    assert cases.load_case(ledger, cid).title == "agentic sessions hang"
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest change")
    run = ledger.record_bench_run(label="x", config={}, summary={}, records=[])
    cases.add_evidence(ledger, cid, "run", run)
    cases.add_evidence(ledger, cid, "note", note="fresh connections work")
    with pytest.raises(CaseError, match="no soak 5"):
        cases.add_evidence(ledger, cid, "soak", 5)
    with pytest.raises(CaseError, match="needs text"):
        cases.add_evidence(ledger, cid, "note")
    view = cases.resolve_case(
        ledger, cid, "proxy", convict=["component:proxy"], override="seen by hand"
    )
    assert view.plan == [] and view.case.verdict("component:proxy") == "convicted"
    with pytest.raises(CaseError, match="resolved"):
        cases.add_suspect(ledger, cid, "component:router", "late")
    kinds = [e.kind for e in view.timeline]
    assert kinds[0] == "opened" and kinds[-1] == "resolved" and kinds.count("evidence") == 2
    assert [v.case.id for v in cases.list_cases(ledger)] == [cid]
    with pytest.raises(CaseError, match="no case 42"):
        cases.view_case(ledger, 42)


def test_revert_preview_shows_cost_and_conviction_test(ledger: Ledger) -> None:
    seed_history(ledger)
    ledger.record_soak(failed_soak({K: "512"}))
    cid = cases.open_case(ledger, "hang")
    with pytest.raises(CaseError, match="not a suspect"):
        cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="512")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest change")
    with pytest.raises(CaseError, match="only a knob"):
        cases.revert_preview(ledger, cid, "component:proxy", current="512")
    preview = cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="512")
    assert (preview.current, preview.revert_to) == ("512", "256")
    assert preview.cost.measured and preview.cost.points[0].change == pytest.approx(-0.1135, 1e-2)
    assert preview.conviction.failing_with == (1,) and not preview.conviction.met
    with pytest.raises(CaseError, match="already 512"):
        cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="512", to="512")


def test_a_case_restarts_by_the_one_restart_plan(tmp_path: Path) -> None:
    """The case's restart is ``restart_plan``: the changed service and its dependents."""
    loaded = load_spec(_spec(tmp_path))
    assert restart_plan(loaded.spec, ["decode"]) == ["decode", "router"]
    assert restart_plan(loaded.spec, ["prefill"]) == ["prefill", "decode", "router"]
    assert restart_plan(loaded.spec, ["router"]) == ["router"]


async def test_restore_needs_a_resolved_case_with_a_plan(ledger: Ledger, tmp_path: Path) -> None:
    loaded = load_spec(_spec(tmp_path))
    cid = cases.open_case(ledger, "x")
    with pytest.raises(CaseError, match="not resolved"):
        await cases.restore(loaded, ledger, cid)
    cases.resolve_case(ledger, cid, "nothing", convict=["component:proxy"], override="by hand")
    with pytest.raises(CaseError, match="nothing to restore"):
        await cases.restore(loaded, ledger, cid)


async def test_a_backup_point_larger_than_an_env_file_is_refused_unread(
    ledger: Ledger, tmp_path: Path
) -> None:
    """``case bisect --good backup:PATH`` read the backup whole (``/dev/zero`` renamed as one,
    a 2 GB file): it is read as an env file is, 1 MiB at most, a larger one refused, named."""
    loaded = load_spec(write_pd_spec(tmp_path, time_scale=0.02))
    backup = tmp_path / "env" / "decode.env.bak-20261130T141743Z"
    backup.write_bytes(b"# a backup\n" + b"A=1\n" * (600 * 1024))  # 2.4 MiB
    with pytest.raises(CaseError, match=r"cannot read the backup .*larger than 1048576 bytes"):
        await find_changes(loaded, ledger, f"backup:{backup}")
    backup.write_bytes(b"# a backup\n")  # a small one is read: no change of a declared knob
    assert await find_changes(loaded, ledger, f"backup:{backup}", f"backup:{backup}") == ()


def test_restore_status_of_an_older_ledger_reads_ok_and_verified(tmp_path: Path) -> None:
    """Events written before they stored one ``ok``: a restore needed ``ok`` and ``verified``."""
    path = tmp_path / "old.db"
    with Ledger.open(path) as ledger:
        seed_history(ledger)
        cid = cases.open_case(ledger, "hang")
        ledger.add(
            KnobChangeRecord(
                id=0,
                at=NOW,
                service="decode",
                name=K,
                old="512",
                new="256",
                reason="suspected",
                case_id=cid,
            )
        )
        cases.resolve_case(ledger, cid, "proxy", exonerate=[f"knob:decode/{K}"])
    raw = sqlite3.connect(path, isolation_level=None)
    old = {"service": "decode", "knob": K, "value": "512", "ok": True, "verified": False}
    raw.execute(
        "INSERT INTO case_events (case_id, at, kind, detail) VALUES (?, '9999', 'restore', ?)",
        (cid, json.dumps(old)),
    )
    raw.close()
    with Ledger.open(path) as ledger:
        assert cases.view_case(ledger, cid).restore_status == RESTORE_FAILED
        ledger.add(CaseEvent(at=NOW, case_id=cid, kind="restore", detail={**old, "verified": True}))
        view = cases.view_case(ledger, cid)
        assert view.restore_status == RESTORE_VERIFIED
        assert all("verified" not in e.detail for e in view.case.events)


def test_a_second_resolve_keeps_the_first_in_the_timeline(ledger: Ledger) -> None:
    target = f"knob:decode/{K}"
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, target, "latest change")
    first = cases.resolve_case(ledger, cid, "the knob", convict=[target], override="by hand")
    assert first.case.verdict(target) == "convicted"
    again = cases.resolve_case(ledger, cid, "the proxy", exonerate=[target])
    assert again.case.root_cause == "the proxy" and again.case.verdict(target) == "exonerated"
    resolved = [e for e in json.loads(case_json(again))["timeline"] if e["kind"] == "resolved"]
    assert [e["data"]["root_cause"] for e in resolved] == ["the knob", "the proxy"]
    assert resolved[0]["at"] == first.case.resolved_at
    assert resolved[0]["data"]["verdicts"] == {target: "convicted"}
    assert resolved[0]["data"]["superseded_at"] == again.case.resolved_at
    assert resolved[1]["data"]["verdicts"] == {target: "exonerated"}


def test_a_suspect_knob_must_be_declared_in_the_spec(ledger: Ledger, tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path)).spec
    cid = cases.open_case(ledger, "hang")
    with pytest.raises(KnobError, match="'NOPE' is not a declared knob of 'decode'"):
        cases.add_suspect(ledger, cid, "knob:decode/NOPE", "typo", spec=spec)
    with pytest.raises(SpecError, match="unknown service"):
        cases.add_suspect(ledger, cid, f"knob:decoder/{K}", "typo", spec=spec)
    assert cases.load_case(ledger, cid).suspects == ()
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "declared", spec=spec)
    cases.add_suspect(ledger, cid, "component:proxy", "not a service of the spec", spec=spec)
    assert len(cases.load_case(ledger, cid).suspects) == 2


def test_a_hand_edited_value_is_named_in_the_refusal(ledger: Ledger) -> None:
    seed_history(ledger)  # the recorded change: 256 -> 512
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest change")
    with pytest.raises(CaseError) as info:
        cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="1024")
    text = str(info.value)
    assert "no recorded change set decode/" + K + " to its current value 1024" in text
    assert "the last recorded change (#1) set it to 512" in text and "--to" in text
    preview = cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="1024", to="512")
    assert (preview.current, preview.revert_to) == ("1024", "512")


def _restored_case(ledger: Ledger) -> int:
    """A case whose exonerated knob was reverted (512 -> 256) and restored, verified."""
    seed_history(ledger)
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest change")
    ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service="decode",
            name=K,
            old="512",
            new="256",
            reason="suspected",
            case_id=cid,
        )
    )
    cases.resolve_case(ledger, cid, "proxy", exonerate=[f"knob:decode/{K}"])
    back = ledger.add(
        KnobChangeRecord(
            id=0,
            at=NOW,
            service="decode",
            name=K,
            old="256",
            new="512",
            reason="restore",
            case_id=cid,
        )
    )
    detail = {"service": "decode", "knob": K, "value": "512", "ok": True, "change_id": back}
    ledger.add(CaseEvent(at=NOW, case_id=cid, kind="restore", detail=detail))
    return cid


async def test_a_restored_case_has_nothing_to_restore(ledger: Ledger, tmp_path: Path) -> None:
    loaded = load_spec(_failing_spec(tmp_path))
    cid = _restored_case(ledger)
    changes = len(ledger.list(KnobChangeRecord))
    outcome = await cases.restore(loaded, ledger, cid)
    assert outcome.ok and outcome.already_restored and outcome.status == RESTORE_VERIFIED
    assert outcome.items == [] and outcome.restart == [] and outcome.verification is None
    assert len(ledger.list(KnobChangeRecord)) == changes  # nothing set
    assert [e.kind for e in cases.load_case(ledger, cid).events] == ["restore"]
    assert f"{K}=512" in (tmp_path / "decode.env").read_text()


def _failing_spec(root: Path) -> Path:
    """One ``decode`` service whose start command fails at once (a restart would fail)."""
    (port,) = free_ports(1)
    (root / "decode.env").write_text(f"{K}=512\n")
    spec = root / "servelab.toml"
    spec.write_text(
        f"""state_dir = "state"
[services.decode]
role = "generic"
url = "http://127.0.0.1:{port}"
start = "exit 3"
env_file = "decode.env"
knobs = ["{K}"]
ready_timeout_s = 3
start_timeout_s = 3
"""
    )
    return spec


# -- against a real stack --------------------------------------------------------------------


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[LoadedSpec]:
    from servelab.ops.deploy import deploy

    loaded = load_spec(_spec(tmp_path))
    try:
        report = await deploy.up(loaded)
        assert all(step.ok for step in report.steps), encode(report)
        yield loaded
    finally:
        await deploy.down(loaded)


async def test_revert_resolve_restore_end_to_end(stack: LoadedSpec, tmp_path: Path) -> None:
    from servelab.ops.knob import diff_knob

    ledger_path = tmp_path / "evidence.db"
    with Ledger.open(ledger_path) as ledger:
        seed_history(ledger)
        cid = cases.open_case(ledger, "agentic sessions hang after several rounds")
        target = f"knob:decode/{K}"
        cases.add_suspect(ledger, cid, target, "latest change before the hang")
        current = await cases.current_value(stack, target)
        preview = cases.revert_preview(ledger, cid, target, current=current)
        said: list[str] = []
        reverted = await cases.revert(stack, ledger, preview, progress=lines(said))
        assert reverted.ok, encode(reverted)
        assert reverted.live == "256" and (await diff_knob(stack, "decode", K)).live == "256"
        assert any("restart" in line for line in said)
        assert [s.service for s in reverted.restart] == ["decode", "router"]
        change = ledger.list(KnobChangeRecord, case_id=cid)
        assert [(c.old, c.new) for c in change] == [("512", "256")]

        # the soak that localized the stall to the proxy: what supports its conviction
        ledger.record_soak(failed_soak(layers=(Layer.CLIENT_PROXY,)), case_id=cid)
        view = cases.resolve_case(
            ledger, cid, "client-side proxy stalls reused connections",
            exonerate=[target], convict=["component:proxy"],
        )  # fmt: skip
        assert view.restore_status == RESTORE_PENDING
        (item,) = view.plan
        assert (item.current, item.restore_to) == ("256", "512")
        assert item.cost.points[0].change == pytest.approx(1 / 1.128 - 1)

        restored = await cases.restore(stack, ledger, cid)
        assert restored.ok and restored.status == RESTORE_VERIFIED, encode(restored)
        assert (await diff_knob(stack, "decode", K)).live == "512"
        final = cases.view_case(ledger, cid)
        assert final.restore_status == RESTORE_VERIFIED
        assert [e.kind for e in final.case.events] == ["revert", "restore"]
        assert restored.verification is not None
        e2e = restored.verification.layer("e2e")
        assert e2e and all(c.ok for c in e2e)
    assert SECRET.encode() not in ledger_path.read_bytes()
    wal = ledger_path.with_name(ledger_path.name + "-wal")
    assert not wal.exists() or SECRET.encode() not in wal.read_bytes()


async def test_a_failed_restart_is_recorded_not_hidden(ledger: Ledger, tmp_path: Path) -> None:
    """A revert whose restart fails: the event records why, and the put-back what is down."""
    (port,) = free_ports(1)
    (tmp_path / "decode.env").write_text(f"{K}=512\n")
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        f"""state_dir = "state"
[services.decode]
role = "generic"
url = "http://127.0.0.1:{port}"
start = "exit 3"
env_file = "decode.env"
knobs = ["{K}"]
ready_timeout_s = 3
start_timeout_s = 3
"""
    )
    loaded = load_spec(spec)
    seed_history(ledger)
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", "latest")
    preview = cases.revert_preview(ledger, cid, f"knob:decode/{K}", current="512")
    outcome = await cases.revert(loaded, ledger, preview)
    assert not outcome.ok
    error = revert_error(outcome)
    assert error is not None and "decode" in error
    (event, put) = cases.load_case(ledger, cid).events  # the revert, then its put-back
    assert event.kind == "revert" and event.detail["ok"] is False
    assert put.kind == "put_back" and put.detail["after"] == "revert"
    assert put.detail["ok"] is False and put.detail["down"] == ["decode"]
    assert event.detail["error"] == outcome.failure and outcome.failure is not None
    assert event_error(decode(EventOutcome, event.detail)) == outcome.failure
    # The failed restart is followed by the put-back (tenth pass, H3): the value found is written
    # back (recorded, not under the case); this service never starts, so the error names it down
    # and the command that brings it back.
    assert error.startswith(outcome.failure)
    assert outcome.put_back is not None and outcome.put_back.down == ("decode",)
    assert "NOT put back as found" in error and "down: decode; bring them back with: " in error
    assert f"{K}=512" in (tmp_path / "decode.env").read_text()
    assert [c.new for c in ledger.list(KnobChangeRecord, case_id=cid)] == ["256"]
    assert [c.new for c in ledger.list(KnobChangeRecord)][-1] == "512"


@pytest.fixture
async def flag_stack(tmp_path: Path) -> AsyncIterator[LoadedSpec]:
    """The PD stack, the decode's server arguments in SGLANG_ARGS, overlap scheduling a knob."""
    from servelab.ops.deploy import deploy

    spec = write_pd_spec(tmp_path, time_scale=0.02, name="flag-e2e", knobs=(K, OVERLAP),
                         decode_env="SGLANG_ARGS=\n")  # fmt: skip
    spec.write_text(spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\n', 1
    ))  # fmt: skip
    loaded = load_spec(spec)
    try:
        report = await deploy.up(loaded)
        assert all(step.ok for step in report.steps), encode(report)
        yield loaded
    finally:
        await deploy.down(loaded)


async def test_an_argument_flag_is_reverted_tested_and_restored_live(
    flag_stack: LoadedSpec, tmp_path: Path
) -> None:
    """``--disable-overlap-schedule`` turned on under suspicion (``case revert --to on``): set in
    SGLANG_ARGS, co-restarted, live in the decode's argv and in its /server_info; exonerated, the
    restore turns it off again, verified at every layer."""
    from servelab.ops.knob import diff_knob

    target = f"knob:decode/{OVERLAP}"
    with Ledger.open(tmp_path / "evidence.db") as ledger:
        cid = cases.open_case(ledger, "agentic sessions hang")
        cases.add_suspect(ledger, cid, target, "the overlap scheduler might race the transfer")
        current = await cases.current_value(flag_stack, target)
        assert current == "off"  # a store_true flag absent from every place
        preview = cases.revert_preview(ledger, cid, target, current=current, to="on")
        reverted = await cases.revert(flag_stack, ledger, preview)
        assert reverted.ok and reverted.live == "on", encode(reverted)
        assert (await diff_knob(flag_stack, "decode", OVERLAP)).live == "on"
        assert reverted.verification is not None
        (arg,) = [c for c in reverted.verification.layer("live") if c.knob == OVERLAP]
        assert arg.ok and arg.code == "live.argument_match"
        assert isinstance(arg.data, ArgumentLive)
        assert (arg.data.engine_known, arg.data.engine) == (True, "on")  # the engine's own word
        view = cases.resolve_case(ledger, cid, "the proxy", exonerate=[target])
        (item,) = view.plan
        assert (item.knob, item.current, item.restore_to) == (OVERLAP, "on", "off")
        restored = await cases.restore(flag_stack, ledger, cid)
        assert restored.ok and restored.status == RESTORE_VERIFIED, encode(restored)
        assert (await diff_knob(flag_stack, "decode", OVERLAP)).live == "off"
        assert restored.verification is not None
        (back,) = [c for c in restored.verification.layer("live") if c.knob == OVERLAP]
        assert back.ok and isinstance(back.data, ArgumentLive) and back.data.engine == "off"


def test_the_timeline_json_keeps_the_shape_it_had_as_dicts(ledger: Ledger) -> None:
    """``case show --json``'s timeline: each entry ``{at, kind, data}``, the typed entries' data
    key for key what they were as dicts, an older stored event (``verified``) as it reads."""
    target = f"knob:decode/{K}"
    cid = cases.open_case(ledger, "hang")
    cases.add_suspect(ledger, cid, target, None)
    cases.add_evidence(ledger, cid, "note", None, "fresh ok")
    older = {"service": "decode", "knob": K, "from": "512", "to": "256", "ok": True,
             "verified": True}  # fmt: skip
    ledger.add(CaseEvent(at=NOW, case_id=cid, kind="revert", detail=older))
    cases.resolve_case(ledger, cid, "the knob", convict=[target], override="by hand")
    cases.resolve_case(ledger, cid, "the proxy", exonerate=[target])
    doc = json.loads(case_json(cases.view_case(ledger, cid)))["timeline"]
    assert all(list(entry) == ["at", "kind", "data"] for entry in doc)
    shown = [(e["kind"], json.dumps(e["data"])) for e in doc if e["kind"] != "override"]
    first = {"root_cause": "the knob", "verdicts": {target: "convicted"},
             "superseded_at": doc[-1]["at"]}  # fmt: skip
    assert shown == [
        ("opened", json.dumps({"title": "hang"})),
        ("suspect", json.dumps({"target": target, "reason": None})),
        ("evidence", json.dumps({"kind": "note", "ref_id": None, "note": "fresh ok"})),
        # recorded events as stored (the ledger writes their keys sorted)
        ("revert", json.dumps({k: v for k, v in older.items() if k != "verified"}, sort_keys=True)),
        ("resolved", json.dumps(first, sort_keys=True)),
        ("resolved", json.dumps({"root_cause": "the proxy", "verdicts": {target: "exonerated"}})),
    ]
