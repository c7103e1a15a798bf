"""Text renderings of up/down/restart reports and of status (returns str, no I/O)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from rich.console import RenderableType
from rich.table import Table

from servelab.core.deploy.contract import OTHERS_RECORD, UNREADABLE_RECORD, ServiceStatus
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.rolling import RollPhase
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
    UnprovenOwner,
)
from servelab.core.ledger.codec import encode
from servelab.core.redaction import redact
from servelab.core.restart.contract import DeployReport, DownLeft, RestartReport
from servelab.core.verify.contract import VerifyReport
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
from servelab.report.document import Worded, document_text
from servelab.report.jsontext import json_text
from servelab.report.othersrecord import others_words, stale_words, whose_mark
from servelab.report.text import plain_text, url_text
from servelab.report.verify import (
    VerificationWords,
    check_detail,
    verification_document,
    with_details,
)

__all__ = [
    "STATUS_COLUMNS",
    "RestartWords",
    "deploy_json",
    "render_deploy",
    "render_down_left",
    "render_interruption",
    "render_restart",
    "render_rolling",
    "render_status",
    "render_up_left",
    "restart_json",
    "rolling_json",
    "status_json",
    "status_rows",
]

STATUS_COLUMNS = ("service", "role", "host", "pid", "url", "readiness", "in router")


def status_rows(statuses: list[ServiceStatus]) -> list[list[str]]:
    """One row per service: service, role, host, pid (and its source), url, readiness answer,
    and, for a worker, whether the router lists it (healthy / unhealthy / missing; - unknown)."""
    rows = []
    for item in statuses:
        if item.pid is None:
            pid = "-"
            if (item.pid_source or "").startswith(OTHERS_RECORD):
                pid += f" ({OTHERS_RECORD})"  # its deployment and pid: in --json
            elif item.pid_source == UNREADABLE_RECORD:
                pid += f" ({UNREADABLE_RECORD})"
        else:
            pid = f"{item.pid}" + ("" if item.alive else " (dead)")
            if item.unrecorded:
                pid += " (servelab's, no pid record)"
            elif item.others is not None:
                pid += f" ({whose_mark(item.others)})"  # the whole mark: in --json
            elif (item.pid_source or "").startswith("owner of port"):
                pid += " (port owner)"
        answer = item.readiness.describe() if item.readiness is not None else "-"
        if item.error is not None:
            answer = f"host did not answer: {item.error}"
        url, answer = url_text(item.url), redact(answer)  # a spec URL's password, masked
        rows.append([item.service, item.role, item.host, pid, url, answer, _in_router(item)])
    return rows


def _in_router(item: ServiceStatus) -> str:
    if item.in_router is None:
        return "-"
    if not item.in_router:
        return "missing"
    return "healthy" if item.router_healthy else "unhealthy"


def deploy_json(report: DeployReport) -> str:
    """``up``/``down --json``: the report as encoded."""
    return json_text(encode(report))


def status_json(statuses: list[ServiceStatus]) -> str:
    """``status --json``: each service's status as encoded."""
    return json_text([encode(item) for item in statuses])


def render_status(statuses: list[ServiceStatus]) -> str:
    table = Table(*STATUS_COLUMNS, title="services")
    for row in status_rows(statuses):
        table.add_row(*row)
    return plain_text(table)


def _step_detail(step: Step) -> str:
    """The step's detail; a restart behind started services names them first."""
    said = _said_detail(step)
    if not step.restarted_behind:
        return said
    behind = ", ".join(step.restarted_behind)
    verb = "was" if len(step.restarted_behind) == 1 else "were"
    why = f"{behind} {verb} started behind it"
    return f"{why}; {said}" if said else why


def _said_detail(step: Step) -> str:
    evidence = step.evidence
    if step.outcome is StepOutcome.FAILED and not isinstance(evidence, Stopped):
        return evidence.error if isinstance(evidence, StepFailure) else ""
    match evidence:
        case LaunchTimeoutReady() | CommandReady() if step.outcome is StepOutcome.TIMED_OUT_HEALTHY:
            return _timed_out(evidence)
        case Ready() | CommandReady() | LaunchTimeoutReady():
            return evidence.log
        case Stopped():
            code = evidence.stop_command_exit
            said = "" if code is None else f"stop command exit {code}"
            words = (
                said,
                _stranger(evidence.port_owner),
                _others(evidence.others_record),
                _unproven(evidence.unproven_owner),
                _stale(evidence.stale_record),
            )
            return "; ".join(w for w in words if w)
        case FoundServing() | StepFailure():
            return ""
        case _:
            assert_never(evidence)


def _stranger(owner: PortOwner | None) -> str:
    """A process this deployment did not start, serving its port (left alone), named."""
    if owner is None:
        return ""
    name = f" ({owner.name})" if owner.name else ""
    return f"its port is held by pid {owner.pid}{name}, not started by this deployment: left alone"


def _unproven(owner: UnprovenOwner | None) -> str:
    """A process on the port that cannot be told this deployment's: named, with how to stop it."""
    if owner is None:
        return ""
    name = f" ({owner.name})" if owner.name else ""
    return (
        f"port {owner.port} on {owner.host} is held by pid {owner.pid}{name}, which cannot be "
        "told this deployment's (no mark in its environment, its output not this service's "
        f"log): not stopped; if it is this deployment's, stop it on {owner.host} with "
        f"`kill -TERM {owner.pid}`"
    )


def _stale(why: str | None) -> str:
    """A pid record left behind once its processes were stopped (a read-only state folder)."""
    return "" if why is None else stale_words(why)


def _others(others: OthersRecord | None) -> str:
    """Another deployment's pid record in a shared state folder (left alone), named."""
    return "" if others is None else others_words(others.deployment, others.pid, others.state_dir)


def _timed_out(evidence: LaunchTimeoutReady | CommandReady) -> str:
    """A start that went past its timeout while the service got ready."""
    if isinstance(evidence, LaunchTimeoutReady):
        what = "launch command timed out"
    else:
        what = f"start command still running after {evidence.command_timeout_s}s"
    status = None if evidence.readiness is None else evidence.readiness.status
    return f"{what}; readiness HTTP {status} after {evidence.probes} probe(s)"


def _steps_table(title: str, steps: list[Step]) -> Table:
    table = Table("service", "outcome", "pid", "seconds", "detail", title=title)
    for step in steps:
        pid = "-" if step.pid is None else str(step.pid)
        seconds = f"{step.elapsed_s:.1f}"
        table.add_row(step.service, step.outcome_said, pid, seconds, _step_detail(step))
    return table


def render_deploy(report: DeployReport) -> str:
    verdict = "ok" if report.ok else "FAILED"
    parts: list[RenderableType] = [_steps_table(f"{report.action}: {verdict}", report.steps)]
    parts.extend(f"  pair/{c.service}: {check_detail(c)}" for c in report.pair if not c.ok)
    if report.action == "down" and all(s.outcome == StepOutcome.NOT_RUNNING for s in report.steps):
        parts.append("nothing of this deployment's was running: nothing stopped")
    return plain_text(*parts)


def render_restart(report: RestartReport) -> str:
    parts: list[RenderableType] = [
        _steps_table(f"restart {' -> '.join(report.plan)}", report.steps)
    ]
    if report.verification is not None:
        failed = report.verification.failures
        word = "ok" if report.verification.ok else f"FAILED ({len(failed)} check(s))"
        parts.append(f"verification: {word}")
        parts.extend(f"  {c.layer}/{c.service}: {check_detail(c)}" for c in failed)
    if report.rolled_back:
        restored = ", ".join(f"{name} <- {path}" for name, path in report.rollback_from.items())
        if restored:
            parts.append(f"rolled back env files: {restored}")
        configs = report.config_rollback_from.items()
        if configs:
            restored = ", ".join(f"{name} <- {path}" for name, path in configs)
            parts.append(f"rolled back config files: {restored}")
        parts.append(_steps_table("rollback restart", report.rollback_steps))
    if report.down:
        parts.append(_down_line(report))
    if report.interrupted:
        parts.append("restart: INTERRUPTED")
    else:
        parts.append("restart: ok" if report.ok else "restart: FAILED")
    return plain_text(*parts)


def _down_line(report: RestartReport) -> str:
    return f"down: {', '.join(report.down)}; bring them back with: {shlex.join(report.recovery)}"


def render_interruption(report: DeployReport | RestartReport | RollingReport) -> str:
    """What an interrupted ``up`` stopped, what an interrupted ``restart`` left down, or which
    worker an interrupted rolling restart left out of the router."""
    if isinstance(report, RollingReport):
        if report.out is None:
            return "rolling restart interrupted; every worker is in the router\n"
        return f"rolling restart interrupted; {_out_line(report)}\n"
    if isinstance(report, DeployReport):
        stopped = ", ".join(report.stopped) or "nothing"
        return f"{report.action} interrupted; stopped what this run started: {stopped}\n"
    if not report.down:
        return "restart interrupted; no service is down\n"
    return f"restart interrupted; {_down_line(report)}\n"


def render_up_left(running: Sequence[str], spec_args: Sequence[str]) -> str:
    """An ``up`` stopped before its cleanup said what it stopped: what still runs, and the
    commands that stop it or bring the rest up."""
    down = shlex.join(["servelab", "down", *spec_args])
    up = shlex.join(["servelab", "up", *spec_args])
    return (f"up interrupted; still running: {', '.join(running)}; stop them with: {down} "
            f"(or bring the rest up with: {up})\n")  # fmt: skip


def render_down_left(left: DownLeft) -> str:
    """A ``down`` stopped by a signal: what it stopped, what still runs, and the command that
    finishes it."""
    still = ", ".join(left.running) or "nothing"
    return (f"down interrupted; stopped: {', '.join(left.stopped) or 'nothing'}; still running: "
            f"{still}; finish with: {shlex.join(left.finish)}\n")  # fmt: skip


@dataclass(frozen=True)
class RestartWords:
    """A restart's verification with each check's reason, in place of the bare one."""

    verification: Worded[VerifyReport, VerificationWords] | None


def restart_json(report: RestartReport) -> str:
    """``restart --json``: the report, its verification's checks each with its reason."""
    done = report.verification
    words = RestartWords(None if done is None else verification_document(done))
    return document_text(Worded(report, words))


# -- rolling restarts ---------------------------------------------------------------------------


def _phase_detail(worker: WorkerRoll, phase: Phase) -> str:
    data = phase.data
    if not phase.ok and phase.name is RollPhase.RESTART:
        evidence = data.step.evidence if isinstance(data, Restarted) else None
        return evidence.error if isinstance(evidence, StepFailure) else "did not start"
    if not phase.ok and phase.name is RollPhase.VERIFY and worker.verification is not None:
        failed = worker.verification.failures
        return "; ".join(f"{c.layer}: {check_detail(c)}" for c in failed)
    why = None if phase.ok else _failure(worker, data)
    return _phase_ok_detail(data) if why is None else why


def _failure(worker: WorkerRoll, data: PhaseData) -> str | None:
    """Why a phase failed, from its reason (None: it gives none)."""
    match data:
        case RemoveRefused():
            return (
                f"no other healthy {worker.target.role} worker is in the router: removing it "
                "would stop the service"
            )
        case Removed(reason=PhaseFailure.STILL_LISTED):
            return f"the router still lists it after {data.timeout_s}s"
        case Drained(reason=PhaseFailure.LOAD_UNREADABLE):
            return "its /get_load answer could not be read (no running-request count)"
        case Drained(reason=PhaseFailure.NOT_DRAINED):
            return f"{data.running} request(s) still running after {data.timeout_s}s"
        case Added(reason=PhaseFailure.NOT_LISTED):
            return f"the router does not list it healthy after {data.timeout_s}s"
        case RoutedByCount(reason=PhaseFailure.NOT_ROUTED):
            return (
                f"its served-request counter stayed at {data.served_before} after {data.polls} "
                f"probe request(s) through the router in {data.timeout_s}s"
            )
        case PhaseError():
            return data.error
        case (
            AlreadyOut() | Removed() | Drained() | Restarted() | Verified() | Added()
            | RoutedByListing() | RoutedByCount()
        ):  # fmt: skip
            return None
        case _:
            assert_never(data)


def _phase_ok_detail(data: PhaseData) -> str:
    match data:
        case AlreadyOut():
            return "was not in the router"
        case RemoveRefused() | Removed():
            return "removed"
        case Drained():
            return f"running {data.running}"
        case Restarted():
            return f"pid {data.step.pid}"
        case Verified():
            return "knobs live, ready"
        case Added():
            return "listed healthy"
        case RoutedByListing():
            return "listed healthy (not a servelab sim: no request counter)"
        case RoutedByCount():
            return f"served requests {data.served_before} -> {data.served_after}"
        case PhaseError():
            return data.error
        case _:
            assert_never(data)


def _rolling_table(report: RollingReport) -> Table:
    table = Table("worker", "phase", "ok", "seconds", "detail", title="rolling restart")
    for worker in report.workers:
        for phase in worker.phases:
            ok = "ok" if phase.ok else "FAILED"
            detail = _phase_detail(worker, phase)
            table.add_row(worker.service, phase.name, ok, f"{phase.elapsed_s:.1f}", detail)
    return table


def _out_line(report: RollingReport) -> str:
    state = "down and out of the router" if report.down else "out of the router"
    ways = " ; or: ".join(shlex.join(command) for command in report.recovery)
    return f"{report.out} is {state}; put it back with: {ways}"


def render_rolling(report: RollingReport) -> str:
    """The phases of every worker, then which worker is out (and how to put it back)."""
    plan = " -> ".join(target.service for target in report.plan)
    parts: list[RenderableType] = [f"rolling restart of {plan} through {report.router}"]
    parts.append(_rolling_table(report))
    if report.error is not None and not report.interrupted:
        parts.append(f"error: {report.error}")
    if report.out is not None:
        parts.append(_out_line(report))
    left = [t.service for t in report.plan[len(report.workers) :]]
    if left and not report.ok:
        parts.append(f"not rolled: {', '.join(left)}")
    word = "INTERRUPTED" if report.interrupted else ("ok" if report.ok else "FAILED")
    parts.append(f"rolling restart: {word}")
    return plain_text(*parts)


def rolling_json(report: RollingReport) -> str:
    """``restart --rolling --json``: the report, each failed phase with its reason sentence,
    each worker's verification checks with theirs."""
    doc = encode(report)
    for worker, item in zip(report.workers, doc["workers"], strict=True):
        for phase, entry in zip(worker.phases, item["phases"], strict=True):
            entry["detail"] = _phase_detail(worker, phase)
        verification = item.get("verification")
        if isinstance(verification, dict):
            item["verification"] = {
                **verification,
                "checks": with_details(verification.get("checks")),
            }
    if report.out is not None:
        doc["out_detail"] = _out_line(report)
    return json_text(doc)
