"""The restart report carries the typed verification; its text and its JSON read from it."""

from __future__ import annotations

from servelab.io.hosts.processes import OUTCOME_OK
from servelab.ops.deploy.results import RestartReport, Step
from servelab.ops.verify.verify import Check, VerifyReport
from servelab.report.deploy import render_restart


def _report(*checks: Check) -> RestartReport:
    verification = VerifyReport(list(checks), "h", ("live", "health"), ["decode"], 0.25, 7)
    steps = [Step("decode", OUTCOME_OK, 11, 1.0, {}), Step("router", OUTCOME_OK, 12, 2.0, {})]
    return RestartReport(["decode", "router"], steps, verification)


def test_a_failed_verification_names_each_failed_check() -> None:
    bad = Check("live", "decode", False, "live 256 != file 512", {"knob": "K"})
    report = _report(Check("health", "decode", True, "200"), bad)
    assert report.verification is not None and not report.ok
    text = render_restart(report)
    assert "verification: FAILED (1 check(s))" in text
    assert "  live/decode: live 256 != file 512" in text
    assert text.rstrip().endswith("restart: FAILED")


def test_the_json_holds_the_verify_reports_own_json() -> None:
    report = _report(Check("health", "decode", True, "200"))
    assert report.ok and "verification: ok" in render_restart(report)
    doc = report.to_json()
    assert report.verification is not None
    assert doc["verification"] == report.verification.to_json()
    assert doc["verification"]["ok"] is True and doc["verification"]["verification_id"] == 7
    assert RestartReport(["router"], []).to_json()["verification"] is None
