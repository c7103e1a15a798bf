"""The restart report carries the typed verification; its text and its JSON read from it."""

from __future__ import annotations

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.verify.checks import Check, CheckCode, HealthProbe, KnobLive, Layer
from servelab.ops.deploy.results import RestartReport, ServiceStatus, Step
from servelab.ops.verify.verify import VerifyReport
from servelab.report.deploy import render_restart, status_rows

READY = Check("decode", True, CheckCode.HEALTH_READY, HealthProbe("/health", 200, 0.01))


def _report(*checks: Check) -> RestartReport:
    layers = (Layer.LIVE, Layer.HEALTH)
    verification = VerifyReport(list(checks), "h", layers, ["decode"], 0.25, 7)
    ok = StepOutcome.OK
    steps = [Step("decode", ok, 11, 1.0, {}), Step("router", ok, 12, 2.0, {})]
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
    doc = report.to_json()
    assert report.verification is not None
    assert doc["verification"] == report.verification.to_json()
    assert doc["verification"]["ok"] is True and doc["verification"]["verification_id"] == 7
    assert RestartReport(["router"], []).to_json()["verification"] is None


def test_a_status_row_names_an_unrecorded_process_and_an_unanswering_host() -> None:
    ours = ServiceStatus("a", "generic", "local", "http://h:1", 7, "owner of port 1", True, None)
    ours.unrecorded = True
    far = ServiceStatus("b", "generic", "far", "http://h:2", None, None, False, None)
    far.error = "far: cannot connect to root@h port 22: no answer (timed out)"
    rows = status_rows([ours, far])
    assert rows[0][3] == "7 (servelab's, no pid record)"
    assert rows[1][3] == "-" and rows[1][5] == f"host did not answer: {far.error}"
