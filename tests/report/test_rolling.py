"""How a rolling restart reads: the phases table, the worker left out and how to put it back,
an interruption, the JSON with each phase's reason (pure: reports built by hand)."""

from __future__ import annotations

from servelab.core.deploy.rolling import RollPhase, RollTarget
from servelab.ops.deploy.rolling_results import Phase, PhaseFailure, RollingReport, WorkerRoll
from servelab.report.deploy import render_interruption, render_rolling, rolling_json

D1 = RollTarget("decode-1", "decode", "http://127.0.0.1:31102")
D2 = RollTarget("decode-2", "decode", "http://127.0.0.1:31103")
RECOVERY = [["servelab", "restart", "--rolling", "decode-1", "-f", "s.toml"]]


def _stopped_at_restart() -> RollingReport:
    worker = WorkerRoll(D1, [
        Phase(RollPhase.REMOVE, True, 0.02, {"worker_ids": ["x"]}),
        Phase(RollPhase.DRAIN, True, 0.1, {"running": 0}),
        Phase(RollPhase.RESTART, False, 3.0,
              {"step": {"evidence": {"error": "decode-1: exited early"}}}),
    ])  # fmt: skip
    return RollingReport([D1, D2], "router", workers=[worker], out="decode-1", down=True,
                         recovery=RECOVERY)  # fmt: skip


def test_a_stopped_roll_names_the_worker_out_and_down_and_how_to_put_it_back() -> None:
    report = _stopped_at_restart()
    assert not report.ok and report.workers[0].down and report.workers[0].out_of_router
    text = render_rolling(report)
    assert "rolling restart of decode-1 -> decode-2 through router" in text
    assert "decode-1: exited early" in text
    assert (
        "decode-1 is down and out of the router; put it back with: "
        "servelab restart --rolling decode-1 -f s.toml" in text
    )
    assert "not rolled: decode-2" in text and text.rstrip().endswith("rolling restart: FAILED")
    doc = rolling_json(report)
    assert doc["workers"][0]["phases"][2]["detail"] == "decode-1: exited early"
    assert doc["recovery"] == ["servelab restart --rolling decode-1 -f s.toml"]
    assert doc["out"] == "decode-1" and doc["down"] is True and doc["ok"] is False


def test_an_interrupted_roll_says_which_worker_is_out() -> None:
    report = _stopped_at_restart()
    report.interrupted, report.error = True, "interrupted"
    line = render_interruption(report)
    assert line.startswith("rolling restart interrupted; decode-1 is down and out of the router")
    assert "INTERRUPTED" in render_rolling(report)
    clean = RollingReport([D1], "router", interrupted=True)
    assert (
        render_interruption(clean) == "rolling restart interrupted; every worker is in the router\n"
    )


def test_failed_phases_read_as_their_reasons() -> None:
    worker = WorkerRoll(D2, [
        Phase(RollPhase.REMOVE, False, 0.0, {"reason": PhaseFailure.NO_OTHER_WORKER, "others": []}),
    ])  # fmt: skip
    report = RollingReport([D2], "router", workers=[worker])
    assert "no other healthy decode worker is in the router" in render_rolling(report)
    routed = WorkerRoll(D2, [Phase(RollPhase.ROUTED, False, 30.0, {
        "reason": PhaseFailure.NOT_ROUTED, "served_before": 9, "polls": 12,
        "timeout_s": 30.0})])  # fmt: skip
    text = render_rolling(RollingReport([D2], "router", workers=[routed]))
    assert "its served-request counter stayed at 9 after 12 probe request(s)" in text
