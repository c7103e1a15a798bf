"""The restart report carries the typed verification; its text and its JSON read from it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from servelab.core.deploy.contract import ServiceStatus
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.probe import ProbeResult
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.deploy.steps import (
    CommandReady,
    FoundServing,
    LaunchTimeoutReady,
    OthersRecord,
    PortOwner,
    Ready,
    Step,
    StepFailure,
    Stopped,
    UnrecordedStop,
)
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger.codec import JsonObject, decode, encode
from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.core.verify.checks import Check, CheckCode, KnobLive, Layer
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.health import HealthProbe
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.report.deploy import _step_detail, render_deploy, render_restart, status_rows

READY = Check("decode", True, CheckCode.HEALTH_READY, HealthProbe("/health", 200, 0.01))


def _report(*checks: Check) -> RestartReport:
    layers = (Layer.LIVE, Layer.HEALTH)
    verification = VerifyReport(list(checks), "h", layers, ["decode"], 0.25, 7)
    ok = StepOutcome.OK
    steps = [
        Step("decode", ok, 11, 1.0, Ready(None, 1, "log")),
        Step("router", ok, 12, 2.0, Ready(None, 1, "log")),
    ]
    return RestartReport(["decode", "router"], steps, verification)


def test_a_failed_verification_names_each_failed_check() -> None:
    differs = KnobLive(42, "pid record", "K", "512", "256", LiveVerdict.DIFFERS)
    bad = Check("decode", False, CheckCode.LIVE_DIFFERS, differs)
    report = _report(READY, bad)
    assert report.verification is not None and not report.ok
    text = render_restart(report)
    assert "verification: FAILED (1 check(s))" in text
    assert "  live/decode: differs: file 512, live 256 (restart needed)" in text
    assert text.rstrip().endswith("restart: FAILED")


def test_the_json_holds_the_verify_reports_own_json() -> None:
    report = _report(READY)
    assert report.ok and "verification: ok" in render_restart(report)
    doc = encode(report)
    assert report.verification is not None
    assert doc["verification"] == encode(report.verification)
    assert doc["verification"]["ok"] is True and doc["verification"]["verification_id"] == 7
    assert encode(RestartReport(["router"], []))["verification"] is None


def test_a_status_row_names_an_unrecorded_process_and_an_unanswering_host() -> None:
    ours = ServiceStatus("a", "generic", "local", "http://h:1", 7, "owner of port 1", True, None)
    ours.unrecorded = True
    far = ServiceStatus("b", "generic", "far", "http://h:2", None, None, False, None)
    far.error = "far: cannot connect to root@h port 22: no answer (timed out)"
    rows = status_rows([ours, far])
    assert rows[0][3] == "7 (servelab's, no pid record)"
    assert rows[1][3] == "-" and rows[1][5] == f"host did not answer: {far.error}"


_PROBE = ProbeResult("http://h:1/health", 200, "ok", 0.01)


def _steps() -> list[tuple[Step, JsonObject, str]]:
    """Each kind of step evidence, the ``evidence`` dict the code wrote before it was typed (key
    for key, in order), and its detail in the steps table."""
    ok, up, timed = StepOutcome.OK, StepOutcome.ALREADY_UP, StepOutcome.TIMED_OUT_HEALTHY
    stopped, failed = StepOutcome.STOPPED, StepOutcome.FAILED
    probe = encode(_PROBE)
    base = {"readiness": probe, "probes": 3, "log": "local:/s/a.log"}
    owner = PortOwner(9)
    gone = UnrecordedStop(8, 8, StepOutcome.STOPPED)
    return [
        (Step("a", ok, 1, 1.0, Ready(_PROBE, 3, "local:/s/a.log")), base, "local:/s/a.log"),
        (Step("a", ok, 1, 1.0, Ready(None, 0, "h:a")),
         {"readiness": None, "probes": 0, "log": "h:a"}, "h:a"),
        (Step("a", ok, 1, 1.0, CommandReady(_PROBE, 3, "local:/s/a.log", 0, False)),
         {**base, "command_exit": 0, "foreground": False}, "local:/s/a.log"),
        (Step("a", timed, 1, 1.0, CommandReady(_PROBE, 3, "local:/s/a.log", None, False, 1.5)),
         {**base, "command_exit": None, "foreground": False, "command_timeout_s": 1.5},
         "start command still running after 1.5s; readiness HTTP 200 after 3 probe(s)"),
        (Step("a", timed, 1, 1.0, LaunchTimeoutReady(_PROBE, 3, "local:/s/a.log")),
         {**base, "launch_timed_out": True},
         "launch command timed out; readiness HTTP 200 after 3 probe(s)"),
        (Step("a", up, 1, 0.0, FoundServing(_PROBE)),
         {"readiness": probe, "pid_source": "port owner"}, ""),
        (Step("a", up, 1, 0.0, FoundServing(_PROBE, recorded_again=True)),
         {"readiness": probe, "pid_source": "port owner", "recorded_again": True}, ""),
        (Step("a", StepOutcome.NOT_RUNNING, None, 0.0, Stopped()), {}, ""),
        (Step("a", stopped, None, 0.0, Stopped(stop_command_exit=0, port_owner=owner)),
         {"stop_command_exit": 0, "port_owner": {"pid": 9, "launched_by_servelab": False}},
         "stop command exit 0; its port is held by pid 9, not started by this deployment: "
         "left alone"),
        (Step("a", failed, None, 0.0, Stopped(stop_command="timed out", unrecorded=gone,
                                              still_serving=7)),
         {"stop_command": "timed out", "unrecorded": {"pid": 8, "pgid": 8, "outcome": "stopped"},
          "still_serving": 7}, ""),
        (Step("a", StepOutcome.NOT_RUNNING, None, 0.0,
              Stopped(others_record=OthersRecord("prod", 5, "/srv/.servelab"))),
         {"others_record": {"deployment": "prod", "pid": 5, "state_dir": "/srv/.servelab"}},
         "the state folder /srv/.servelab is shared with deployment 'prod': its pid record "
         "(pid 5) is that deployment's, left alone (give each spec its own state_dir)"),
        (Step("a", failed, None, 0.0, StepFailure("a: not ready")), {"error": "a: not ready"},
         "a: not ready"),
    ]  # fmt: skip


def test_a_steps_typed_evidence_is_stored_as_the_dict_it_replaced() -> None:
    """deployments.detail and ``--json`` keep every key, value and order of the old evidence."""
    for step, old, _detail in _steps():
        doc = encode(step)
        assert json.dumps(doc["evidence"]) == json.dumps(old)
        # the old keys in their order; the derived word the table shows is added after them
        assert list(doc) == ["service", "outcome", "pid", "elapsed_s", "evidence", "outcome_said"]
        assert doc["outcome_said"] == doc["outcome"]


def test_a_steps_detail_is_worded_from_its_evidence() -> None:
    for step, _old, detail in _steps():
        assert _step_detail(step) == detail


def test_an_older_deployment_row_still_reads(tmp_path: Path) -> None:
    """The ledger keeps a deployment's detail as JSON: a row written before the evidence was
    typed reads back as it was, and a typed one reads back as its JSON."""
    evidence = {"readiness": None, "probes": 0, "log": "h:a"}
    step = {"service": "a", "outcome": "ok", "pid": 1, "elapsed_s": 1.0, "evidence": evidence}
    old = {"ok": True, "steps": [step]}
    report = DeployReport("up", [step for step, _old, _detail in _steps()])
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ledger.add(
            DeploymentRecord(id=0, at=NOW, name="pd", spec_hash="h", action="up", detail=old)
        )
        ledger.add(
            DeploymentRecord(
                id=0, at=NOW, name="pd", spec_hash="h", action="up", detail=encode(report)
            )
        )
        then, now = ledger.list(DeploymentRecord)
    assert then.detail == old
    assert now.detail == encode(report)


def test_a_router_up_restarted_behind_a_started_worker_is_a_restart_step() -> None:
    """``up``'s restart of a router behind the decode it started: ``restarted`` in the table,
    what was started behind it in the detail, ``restarted_behind`` in the JSON (absent
    otherwise); a failed restart stays ``failed``, its detail naming why it was restarted."""
    ready = Ready(_PROBE, 3, "local:/s/r.log")
    step = Step("router", StepOutcome.OK, 7, 1.0, ready, restarted_behind=("decode",))
    assert encode(step)["restarted_behind"] == ["decode"]
    assert encode(step)["outcome"] == "ok" and encode(step)["outcome_said"] == "restarted"
    assert decode(Step, encode(step)) == step  # the word is derived: read back, it is ignored
    assert _step_detail(step) == "decode was started behind it; local:/s/r.log"
    both = Step("router", StepOutcome.OK, 7, 1.0, ready, restarted_behind=("prefill", "decode"))
    assert _step_detail(both) == "prefill, decode were started behind it; local:/s/r.log"
    failed = Step("router", StepOutcome.FAILED, None, 1.0, StepFailure("router: not ready"),
                  restarted_behind=("decode",))  # fmt: skip
    assert _step_detail(failed) == "decode was started behind it; router: not ready"
    text = render_deploy(DeployReport("up", [step]))
    assert "│ router  │ restarted │" in text, text
    failed_text = render_deploy(DeployReport("up", [failed]))
    assert encode(failed)["outcome_said"] == "failed"
    assert "restarted" not in failed_text and "failed" in failed_text, failed_text
    assert "restarted" not in render_deploy(
        DeployReport("up", [replace(step, restarted_behind=None)])
    )
