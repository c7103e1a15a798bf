"""Text renderings of up/down/restart reports and of status (returns str, no I/O)."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from servelab.ops.deployresults import (
    OUTCOME_FAILED,
    OUTCOME_TIMED_OUT_HEALTHY,
    DeployReport,
    RestartReport,
    ServiceStatus,
    Step,
)
from servelab.report.text import plain_text
from servelab.report.verify import check_detail, with_details

__all__ = [
    "STATUS_COLUMNS",
    "render_deploy",
    "render_interruption",
    "render_restart",
    "render_status",
    "restart_json",
    "status_rows",
]

STATUS_COLUMNS = ("service", "role", "host", "pid", "url", "readiness")


def status_rows(statuses: list[ServiceStatus]) -> list[list[str]]:
    """One row per service: service, role, host, pid (and its source), url, readiness answer."""
    rows = []
    for item in statuses:
        if item.pid is None:
            pid = "-"
        else:
            pid = f"{item.pid}" + ("" if item.alive else " (dead)")
            if (item.pid_source or "").startswith("owner of port"):
                pid += " (port owner)"
        answer = item.readiness.describe() if item.readiness is not None else "-"
        rows.append([item.service, item.role, item.host, pid, item.url, answer])
    return rows


def render_status(statuses: list[ServiceStatus]) -> str:
    table = Table(*STATUS_COLUMNS, title="services")
    for row in status_rows(statuses):
        table.add_row(*row)
    return plain_text(table)


def _step_detail(step: Step) -> str:
    evidence = step.evidence
    if step.outcome == OUTCOME_FAILED:
        return str(evidence.get("error", ""))
    if step.outcome == OUTCOME_TIMED_OUT_HEALTHY:
        readiness = evidence.get("readiness") or {}
        what = (
            "launch command timed out"
            if evidence.get("launch_timed_out")
            else f"start command still running after {evidence.get('command_timeout_s')}s"
        )
        probes = evidence.get("probes")
        return f"{what}; readiness HTTP {readiness.get('status')} after {probes} probe(s)"
    if "stop_command_exit" in evidence:
        return f"stop command exit {evidence['stop_command_exit']}"
    return str(evidence.get("log", ""))


def _steps_table(title: str, steps: list[Step]) -> Table:
    table = Table("service", "outcome", "pid", "seconds", "detail", title=title)
    for step in steps:
        pid = "-" if step.pid is None else str(step.pid)
        table.add_row(step.service, step.outcome, pid, f"{step.elapsed_s:.1f}", _step_detail(step))
    return table


def render_deploy(report: DeployReport) -> str:
    verdict = "ok" if report.ok else "FAILED"
    return plain_text(_steps_table(f"{report.action}: {verdict}", report.steps))


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
        parts.append(f"rolled back env files: {restored}")
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


def render_interruption(report: DeployReport | RestartReport) -> str:
    """What an interrupted ``up`` stopped, or what an interrupted ``restart`` left down."""
    if isinstance(report, DeployReport):
        stopped = ", ".join(report.stopped) or "nothing"
        return f"{report.action} interrupted; stopped what this run started: {stopped}\n"
    if not report.down:
        return "restart interrupted; no service is down\n"
    return f"restart interrupted; {_down_line(report)}\n"


def restart_json(report: RestartReport) -> dict[str, Any]:
    """``restart --json``: the report, its verification's checks each with its reason."""
    doc = report.to_json()
    verification = doc.get("verification")
    if isinstance(verification, dict):
        doc["verification"] = {**verification, "checks": with_details(verification.get("checks"))}
    return doc
