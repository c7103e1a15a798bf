"""How a rolling restart reads: the phases table, the worker left out and how to put it back,
an interruption, the JSON with each phase's reason (pure: reports built by hand)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.deploy.rolling import RollPhase, RollTarget
from servelab.core.deploy.steps import Ready, Step, StepFailure
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.verify.checks import CheckCode
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.routerworkers import RouterWorker
from servelab.ops.deploy.rolling_results import (
    Added,
    AlreadyOut,
    Drained,
    Phase,
    PhaseData,
    PhaseError,
    PhaseFailure,
    Removed,
    RemoveRefused,
    Restarted,
    RollingReport,
    RoutedByCount,
    RoutedByListing,
    Verified,
    WorkerRoll,
)
from servelab.report.deploy import render_interruption, render_rolling, rolling_json

D1 = RollTarget("decode-1", "decode", "http://127.0.0.1:31102")
D2 = RollTarget("decode-2", "decode", "http://127.0.0.1:31103")
DIED = Step("decode-1", StepOutcome.FAILED, None, 3.0, StepFailure("decode-1: exited early"))
RECOVERY = [["servelab", "restart", "--rolling", "decode-1", "-f", "s.toml"]]


def _stopped_at_restart() -> RollingReport:
    worker = WorkerRoll(D1, [
        Phase(RollPhase.REMOVE, True, 0.02, Removed(("x",), (), 1, 30.0)),
        Phase(RollPhase.DRAIN, True, 0.1, Drained(0, 1, 30.0)),
        Phase(RollPhase.RESTART, False, 3.0, Restarted(DIED)),
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
    doc = json.loads(rolling_json(report))
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
        Phase(RollPhase.REMOVE, False, 0.0, RemoveRefused((), ())),
    ])  # fmt: skip
    report = RollingReport([D2], "router", workers=[worker])
    assert "no other healthy decode worker is in the router" in render_rolling(report)
    routed = WorkerRoll(D2, [Phase(RollPhase.ROUTED, False, 30.0, RoutedByCount(
        9, 9, 12, 30.0, (200,) * 12, PhaseFailure.NOT_ROUTED))])  # fmt: skip
    text = render_rolling(RollingReport([D2], "router", workers=[routed]))
    assert "its served-request counter stayed at 9 after 12 probe request(s)" in text


_WORKER = RouterWorker("w1", "http://127.0.0.1:31102", "decode", True)
_UP = Step("decode-1", StepOutcome.OK, 42, 2.5, Ready(None, 2, "local:/s/decode-1.log"))


def _phases() -> list[tuple[PhaseData, JsonObject]]:
    """Each kind of phase data and the dict the roll wrote before it was typed (in order)."""
    listed = {"id": "w1", "url": "http://127.0.0.1:31102", "role": "decode", "healthy": True,
              "bootstrap_port": None}  # fmt: skip
    code = CheckCode.LIVE_DIFFERS
    return [
        (RemoveRefused(("w1",), ()),
         {"worker_ids": ["w1"], "others": [], "reason": "no_other_worker"}),
        (AlreadyOut((), ("http://b",)), {"worker_ids": [], "others": ["http://b"],
                                         "already_out": True}),
        (Removed(("w1",), ("http://b",), 3, 30.0),
         {"worker_ids": ["w1"], "others": ["http://b"], "polls": 3, "timeout_s": 30.0,
          "reason": None}),
        (Removed(("w1",), ("http://b",), 9, 1.0, PhaseFailure.STILL_LISTED),
         {"worker_ids": ["w1"], "others": ["http://b"], "polls": 9, "timeout_s": 1.0,
          "reason": "still_listed"}),
        (Drained(None, 4, 2.0, PhaseFailure.LOAD_UNREADABLE),
         {"running": None, "polls": 4, "timeout_s": 2.0, "reason": "load_unreadable"}),
        (Drained(0, 1, 2.0), {"running": 0, "polls": 1, "timeout_s": 2.0, "reason": None}),
        (Restarted(_UP), {"step": encode(_UP)}),
        (Verified((code,)), {"failures": ["live.differs"]}),
        (Added("w1", (_WORKER,), 2, 30.0), {"worker_id": "w1", "listed": [listed], "polls": 2,
                                            "timeout_s": 30.0, "reason": None}),
        (RoutedByListing(), {"served_before": None, "evidence": "listed"}),
        (RoutedByCount(9, 10, 2, 30.0, (200, None)),
         {"served_before": 9, "served_after": 10, "polls": 2, "timeout_s": 30.0,
          "probe_statuses": [200, None], "reason": None}),
        (PhaseError("RouterApiError: no"), {"reason": "error", "error": "RouterApiError: no"}),
    ]  # fmt: skip


def test_a_phases_typed_data_is_stored_as_the_dict_it_replaced() -> None:
    """The recorded roll (deployments.detail) and ``--json`` keep every key, value and order."""
    for data, old in _phases():
        doc = encode(Phase(RollPhase.DRAIN, True, 1.23456, data))
        head = {"phase": "drain", "ok": True, "elapsed_s": 1.235}
        assert json.dumps(doc) == json.dumps({**head, **old})


def test_an_older_rolling_row_still_reads(tmp_path: Path) -> None:
    """The ledger keeps a roll as JSON: one recorded before the phases were typed reads back as
    it was, and a typed one as its JSON."""
    phases = [{"phase": "remove", "ok": True, "elapsed_s": 0.1, **old} for _d, old in _phases()]
    old_roll = {"action": "restart --rolling", "ok": False,
                "workers": [{"service": "decode-1", "phases": phases}]}  # fmt: skip
    worker = WorkerRoll(D1, [Phase(RollPhase.REMOVE, True, 0.1, d) for d, _old in _phases()])
    report = RollingReport([D1], "router", workers=[worker])
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        for detail in (old_roll, encode(report)):
            ledger.add(
                DeploymentRecord(
                    id=0,
                    at=NOW,
                    name="pd",
                    spec_hash="h",
                    action="restart --rolling",
                    detail=detail,
                )
            )
        then, now = ledger.list(DeploymentRecord)
    assert then.detail == old_roll
    assert now.detail == encode(report)
    assert now.detail["workers"][0]["phases"] == phases


def test_the_rolling_report_keeps_the_keys_and_order_it_was_written_in() -> None:
    """``restart --rolling --json`` and the deployment row: the codec writes the report in the
    shape the hand-written JSON had (keys, order, the plan's services, the recovery's lines)."""
    worker = WorkerRoll(D1, [Phase(RollPhase.REMOVE, False, 0.12345, PhaseError("boom"))])
    report = RollingReport([D1, D2], "router", "http://r", [worker], "boom", False, "decode-1",
                           True, RECOVERY, 7)  # fmt: skip
    doc = encode(report)
    assert json.dumps(doc) == json.dumps({
        "action": "restart --rolling", "ok": False, "plan": ["decode-1", "decode-2"],
        "router": "router", "router_url": "http://r",
        "workers": [{"service": "decode-1", "role": "decode", "url": D1.url, "ok": False,
                     "phases": [{"phase": "remove", "ok": False, "elapsed_s": 0.123,
                                 "reason": "error", "error": "boom"}],
                     "verification": None}],
        "error": "boom", "interrupted": False, "out": "decode-1", "down": True,
        "recovery": ["servelab restart --rolling decode-1 -f s.toml"], "deployment_id": 7,
    })  # fmt: skip
