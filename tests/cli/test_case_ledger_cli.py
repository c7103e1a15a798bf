"""``servelab case|restore|report|ledger`` as real processes on real ledger files, no stack: a case
opened, suspected, evidenced and resolved (``--json``), the ledger from the environment, ``report``
rewriting only what a verdict changed, a newer ledger refused, a resolve the evidence contradicts
refused unless overridden, and a restore with nothing to restore restarting nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from servelab.core.case.experiment import (
    ARM_REVERT,
    ARM_SUSPECT,
    ArmTally,
    ExperimentRecord,
    decide,
)
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import encode
from servelab.core.verify.record import UntypedCheck
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from servelab.report.docs import build_docs
from tests.support import free_ports, run_cli
from tests.support.casecli import TARGET, seeded_ledger
from tests.support.casecli import cli_json as _json
from tests.support.history import K
from tests.support.specs import write_pd_spec


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return seeded_ledger(tmp_path / "l" / "ledger.db")


def test_case_commands_with_json(ledger_file: Path, tmp_path: Path) -> None:
    led = ("--ledger", str(ledger_file))
    opened = _json("case", "open", "agentic sessions hang", *led)
    cid = str(opened["id"])
    assert opened == {"id": 1, "title": "agentic sessions hang", "status": "open"}
    assert _json("case", "suspect", cid, TARGET, "--reason", "latest change", *led)["id"] == 1
    assert _json("case", "evidence", cid, "--soak", "1", *led)["kind"] == "soak"
    assert _json("case", "evidence", cid, "--note", "fresh connections work", *led)["id"] == 2
    bad = run_cli("case", "evidence", cid, "--soak", "9", *led)
    assert bad.returncode == 2 and "no soak 9" in bad.stderr
    two = run_cli("case", "evidence", cid, "--soak", "1", "--note", "x", *led)
    assert two.returncode == 2 and "exactly one" in two.stderr
    resolved = _json("case", "resolve", cid, "--root-cause", "client-side proxy",
                     "--exonerate", TARGET, "--convict", "component:proxy",
                     "--override", "seen by hand", *led)  # fmt: skip
    assert resolved["restore_status"] == "nothing to restore"  # nothing was reverted under it
    shown = _json("case", "show", cid, *led)
    assert [e["kind"] for e in shown["timeline"]][:3] == ["opened", "suspect", "evidence"]
    assert _json("case", "list", *led)[0]["status"] == "resolved"
    missing = run_cli("case", "show", "77", *led)
    assert missing.returncode == 2 and "no case 77" in missing.stderr
    with Ledger.open(ledger_file) as ledger:  # a row as ledgers stored it before check codes
        old = UntypedCheck("live", "decode", True, "live 256 = file", {"knob": K})
        ledger.record_verification(spec_hash="h", ok=True, checks=[old])
    dump = _json("ledger", "export", *led)
    assert dump["cases"][0]["suspects"][0]["verdict"] == "exonerated"
    assert dump["ab_runs"][0]["knob"] == K
    assert dump["verifications"][-1]["checks"][0]["detail"] == "live 256 = file"


def test_ledger_path_from_environment(ledger_file: Path, tmp_path: Path) -> None:
    env = {"SERVELAB_LEDGER": str(ledger_file)}
    assert _json("case", "open", "via env", env=env, cwd=tmp_path)["id"] == 1
    with Ledger.open(ledger_file) as ledger:
        case = ledger.get(CaseRecord, 1)
        assert case is not None and case.title == "via env"


def test_report_writes_then_rewrites_only_what_a_verdict_changed(
    ledger_file: Path, tmp_path: Path
) -> None:
    led = ("--ledger", str(ledger_file))
    out = tmp_path / "docs"
    cid = str(_json("case", "open", "stall", *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "latest", *led)
    _json("case", "resolve", cid, "--root-cause", "knob", "--convict", TARGET,
          "--override", "by hand", *led)  # fmt: skip
    first = _json("report", "--out", str(out), *led)
    assert sorted(first["written"]) == ["ab/ab-1.html", "ab/ab-1.md", "cases/case-1.html",
                                        "cases/case-1.md", "index.html", "perf-plan.html",
                                        "perf-plan.md", "plots/ab-1.png", "soaks/soak-1.html",
                                        "soaks/soak-1.md"]  # fmt: skip
    assert _json("report", "--out", str(out), *led)["written"] == []
    _json("case", "resolve", cid, "--root-cause", "proxy", "--exonerate", TARGET, *led)
    third = _json("report", "--out", str(out), *led)
    assert sorted(third["written"]) == ["cases/case-1.html", "cases/case-1.md", "index.html",
                                        "perf-plan.html", "perf-plan.md"]  # fmt: skip
    assert "**exonerated**" in (out / "perf-plan.md").read_text()


def test_newer_ledger_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    done = run_cli("case", "list", "--ledger", str(path))
    assert done.returncode == 1
    assert "newer than this servelab supports" in done.stderr


# -- revert and restore through the CLI, against a real stack ----------------------------------


def test_suspect_refuses_a_knob_the_spec_does_not_declare(
    ledger_file: Path, tmp_path: Path
) -> None:
    led = ("--ledger", str(ledger_file))
    spec = ("-f", str(write_pd_spec(tmp_path / "dep", name="suspects")))
    cid = str(_json("case", "open", "hang", *led)["id"])
    bad = run_cli("case", "suspect", cid, "knob:decode/NOPE", "--reason", "typo", *spec, *led)
    assert bad.returncode == 2, bad.stderr
    assert "'NOPE' is not a declared knob of 'decode'" in bad.stderr
    assert _json("case", "show", cid, *led)["suspects"] == []
    assert _json("case", "suspect", cid, TARGET, "--reason", "latest", *spec, *led)["id"] == 1


def _record_experiment(ledger_file: Path, cid: int, failed: tuple[int, int]) -> int:
    """An experiment on the case (as ``case test`` records it): 6 sessions per arm."""
    suspect = ArmTally(ARM_SUSPECT, "512", 6, failed[0])
    revert = ArmTally(ARM_REVERT, "256", 6, failed[1])
    record = ExperimentRecord(cid, TARGET, "512", "256", 2, 1, decide(suspect, revert), suspect,
                              revert, found="512", left="512")  # fmt: skip
    with Ledger.open(ledger_file) as ledger:
        event = ledger.add(CaseEvent(at=NOW, case_id=cid, kind="experiment", detail=encode(record)))
        return ledger.add(
            CaseEvidence(at=NOW, case_id=cid, kind="experiment", ref_id=event, note="x")
        )


@pytest.mark.timeout(300)
def test_resolve_refuses_what_the_experiment_contradicts_unless_overridden(
    ledger_file: Path, tmp_path: Path
) -> None:
    led = ("--ledger", str(ledger_file))
    with Ledger.open(ledger_file) as ledger:
        cid = cases.open_case(ledger, "hang")
        cases.add_suspect(ledger, cid, TARGET, "latest")
    unsupported = run_cli("case", "resolve", str(cid), "--root-cause", "knob", "--convict", TARGET,
                          *led)  # fmt: skip
    assert unsupported.returncode == 2, unsupported.stderr
    assert "no recorded evidence supports it" in unsupported.stderr
    eid = _record_experiment(ledger_file, cid, (6, 0))  # the revert cured it: convicted
    refused = run_cli("case", "resolve", str(cid), "--root-cause", "proxy", "--exonerate", TARGET,
                      "--json", *led)  # fmt: skip
    assert refused.returncode == 2
    doc = json.loads(refused.stdout)
    assert doc["ok"] is False
    assert f"{TARGET} exonerated: contradicted by evidence #{eid}" in doc["error"]
    with Ledger.open(ledger_file) as ledger:
        assert cases.load_case(ledger, cid).status == "open"  # nothing was resolved
        view = cases.resolve_case(ledger, cid, "the knob", convict=[TARGET])  # supported
        assert view.case.verdict(TARGET) == "convicted" and view.plan == []
    over = run_cli("case", "resolve", str(cid), "--root-cause", "proxy", "--exonerate", TARGET,
                   "--override", "the experiment ran on the wrong host", *led)  # fmt: skip
    assert over.returncode == 0, over.stderr
    shown = run_cli("case", "show", str(cid), *led).stdout
    assert "override: the experiment ran on the wrong host — against the evidence" in shown
    assert f"case test {TARGET}: CONVICTED" in shown
    with Ledger.open(ledger_file) as ledger:
        page = build_docs(ledger.snapshot(records=False))[f"cases/case-{cid}.md"].decode()
    assert "override: the experiment ran on the wrong host" in page
    assert f"(evidence #{eid})" in page and "experiment: x" in page


def test_a_second_resolve_says_the_first_is_kept(ledger_file: Path) -> None:
    led = ("--ledger", str(ledger_file))
    cid = str(_json("case", "open", "hang", *led)["id"])
    first = run_cli("case", "resolve", cid, "--root-cause", "the knob", "--convict", TARGET,
                    "--override", "by hand", *led)  # fmt: skip
    assert first.returncode == 0 and "kept" not in first.stdout
    again = run_cli(
        "case", "resolve", cid, "--root-cause", "the proxy", "--exonerate", TARGET, *led
    )
    assert again.returncode == 0, again.stderr
    assert "resolved again: the proxy" in again.stdout
    assert "the earlier resolution (the knob) is kept in its timeline" in again.stdout
    shown = run_cli("case", "show", cid, *led).stdout
    assert "resolved: root cause: the knob" in shown and "(superseded" in shown
    assert "resolved: root cause: the proxy" in shown


def test_restore_of_a_restored_case_restarts_nothing(ledger_file: Path, tmp_path: Path) -> None:
    """The spec's only service cannot start: a restart would fail; there must be none."""
    (port,) = free_ports(1)
    (tmp_path / "decode.env").write_text(f"{K}=512\n")
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        f'state_dir = "state"\n[services.decode]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = "exit 3"\nenv_file = "decode.env"\n'
        f'knobs = ["{K}"]\nready_timeout_s = 3\nstart_timeout_s = 3\n'
    )
    with Ledger.open(ledger_file) as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        change = {"service": "decode", "name": K, "case_id": case_id, "backup_path": None}
        ledger.add(
            KnobChangeRecord(id=0, at=NOW, **change, old="512", new="256", reason="suspected")
        )
    cid = str(case_id)
    led = ("--ledger", str(ledger_file))
    _json("case", "resolve", cid, "--root-cause", "proxy", "--exonerate", TARGET, *led)
    with Ledger.open(ledger_file) as ledger:
        back = ledger.add(
            KnobChangeRecord(id=0, at=NOW, **change, old="256", new="512", reason="restore")
        )
        detail = {"service": "decode", "knob": K, "value": "512", "ok": True, "change_id": back}
        ledger.add(CaseEvent(at=NOW, case_id=case_id, kind="restore", detail=detail))
    again = run_cli("restore", cid, "-f", str(spec), *led)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"case {cid}: nothing to restore: already restored and verified" in again.stdout
    assert "restore: decode" not in again.stdout and "restart" not in again.stderr
    assert not (tmp_path / "state" / "logs").exists()  # nothing was started
    doc = _json("restore", cid, "-f", str(spec), *led)
    assert doc["ok"] and doc["already_restored"] and doc["items"] == [] and doc["restart"] == []


def test_report_pages_show_user_text_as_text_never_html_nor_a_link(
    ledger_file: Path, tmp_path: Path
) -> None:
    """Issue 38, defect D: a lone backtick in a case's title shifted the page's code spans so
    that a later note's ``<img onerror>`` was written raw into ``cases/case-1.md``; a title
    ``[x](javascript:alert(1))`` was a live link there and in the perf plan."""
    from markdown_it import MarkdownIt

    led = ("--ledger", str(ledger_file))
    title = "a ` b [x](javascript:alert(1))"
    cid = str(_json("case", "open", title, *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "col | umn <b>", *led)
    _json("case", "evidence", cid, "--note", "<img src=x onerror=alert(1)>", *led)
    _json("case", "resolve", cid, "--root-cause", "![i](https://evil/x.png)",
          "--exonerate", TARGET, "--override", "by hand", *led)  # fmt: skip
    out = tmp_path / "docs"
    assert "cases/case-1.md" in _json("report", "--out", str(out), *led)["written"]
    render = MarkdownIt("commonmark").enable("table")
    for name in ("cases/case-1.md", "perf-plan.md"):
        tokens = render.parse((out / name).read_text())
        found = [t for tok in tokens for t in [tok, *(tok.children or [])]]
        assert not [t.content for t in found if t.type.startswith("html")], name
        targets = [t.attrs for t in found if t.type in ("link_open", "image")]
        assert all(str(a.get("src", a.get("href"))).startswith("plots/") for a in targets), name
    page = render.render((out / "cases/case-1.md").read_text())
    assert f"<h1>Case 1: {title}</h1>" in page  # shown as written
    assert "<td>col | umn &lt;b&gt;</td>" in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    twin = (out / "cases/case-1.html").read_text()
    assert "<img" not in twin and "<a " not in twin and "[x](javascript:alert(1))" in twin
