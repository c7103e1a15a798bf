"""Bring a deployment up, stop it, show its status, and restart it safely.

- :func:`up` starts services in dependency order, each gated on readiness (its ``readiness_path``
  polled until 200 or ``ready_timeout_s``; a process that exits meanwhile fails at once). Services
  already up and ready are skipped. On failure (or Ctrl-C) it stops what *it* started, in reverse
  order, and raises :class:`~servelab.errors.HealthTimeout` or
  :class:`~servelab.errors.ServiceStartError` naming the service, its last probe answer and its log.
- :func:`down` stops services in reverse dependency order through their process groups
  (SIGTERM, SIGKILL after ``stop_grace_s``), or their ``stop`` command / systemd unit. Idempotent.
- :func:`status` reports per service: pid (and where it came from), alive, url, readiness answer.
- :func:`restart` co-restarts the services and their dependents
  (:func:`~servelab.core.topology.restart_plan`). A shell start command that outlives
  ``start_timeout_s`` is not a failure by itself:
  readiness is re-probed until ``ready_timeout_s`` and the step says "command timed out; service
  healthy" with the evidence. Then it verifies (:func:`servelab.ops.verify.verify`) and, with
  ``rollback=True``, when the restart or its verification fails, restores each env file from its
  latest backup taken before the restart (the state before the last ``knob set``; the current file
  is first copied aside as ``PATH.pre-restart-STAMP``) and restarts again.

A shell ``start`` command is expected to return (``systemctl restart X``, a script that
daemonizes); its process group is recorded all the same, so ``down`` also stops a command that
stayed in the foreground.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.envfile import parse_envfile
from servelab.core.spec import spec_hash
from servelab.core.topology import down_plan, restart_plan, service_argv, up_plan
from servelab.errors import (
    CommandTimeout,
    DeployError,
    HostError,
    ServelabError,
    ServiceStartError,
)
from servelab.io.discovery import find_process, unit_main_pid
from servelab.io.envfiles import latest_backup, save_copy
from servelab.io.http import ProbeResult, probe
from servelab.io.ledger import Ledger
from servelab.io.processes import (
    OUTCOME_OK,
    OUTCOME_TIMED_OUT_HEALTHY,
    PidRecord,
    is_alive,
    proc_stat,
    read_pid_record,
    remove_pid_record,
    spawn,
    stop_record,
    wait_ready,
    write_pid_record,
)
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.verify import verify

__all__ = [
    "OUTCOME_ALREADY_UP",
    "OUTCOME_FAILED",
    "OUTCOME_OK",
    "OUTCOME_TIMED_OUT_HEALTHY",
    "DeployReport",
    "RestartReport",
    "ServiceStatus",
    "Step",
    "down",
    "restart",
    "status",
    "up",
]

OUTCOME_ALREADY_UP = "already up"
OUTCOME_FAILED = "failed"
_PROBE_TIMEOUT_S = 5.0


@dataclass
class Step:
    """What happened to one service: outcome, pid, time taken, and the evidence."""

    service: str
    outcome: str
    pid: int | None = None
    elapsed_s: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.outcome != OUTCOME_FAILED

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "outcome": self.outcome,
            "pid": self.pid,
            "elapsed_s": round(self.elapsed_s, 3),
            "evidence": self.evidence,
        }


@dataclass
class DeployReport:
    """The result of ``up`` or ``down``."""

    action: str
    steps: list[Step]
    deployment_id: int | None = None

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "ok": self.ok,
            "deployment_id": self.deployment_id,
            "steps": [step.to_json() for step in self.steps],
        }


@dataclass
class RestartReport:
    """The result of ``restart``: its steps, the verification, and the rollback if one ran."""

    plan: list[str]
    steps: list[Step]
    verification: dict[str, Any] | None = None
    backups: dict[str, str] = field(default_factory=dict)
    rollback_from: dict[str, str] = field(default_factory=dict)
    rolled_back: bool = False
    rollback_steps: list[Step] = field(default_factory=list)
    deployment_id: int | None = None

    @property
    def ok(self) -> bool:
        verified = self.verification is None or bool(self.verification.get("ok"))
        return all(step.ok for step in self.steps) and verified and not self.rolled_back

    def to_json(self) -> dict[str, Any]:
        return {
            "action": "restart",
            "ok": self.ok,
            "plan": self.plan,
            "steps": [s.to_json() for s in self.steps],
            "verification": self.verification,
            "backups": self.backups,
            "rollback_from": self.rollback_from,
            "rolled_back": self.rolled_back,
            "rollback_steps": [s.to_json() for s in self.rollback_steps],
            "deployment_id": self.deployment_id,
        }


@dataclass
class ServiceStatus:
    """One service as it is now."""

    service: str
    role: str
    host: str
    url: str
    pid: int | None
    pid_source: str | None
    alive: bool
    readiness: ProbeResult | None

    @property
    def ready(self) -> bool:
        return self.readiness is not None and self.readiness.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "role": self.role,
            "host": self.host,
            "url": self.url,
            "pid": self.pid,
            "pid_source": self.pid_source,
            "alive": self.alive,
            "ready": self.ready,
            "readiness": None if self.readiness is None else self.readiness.to_json(),
        }


def _state_dir(op: Operation, service: str) -> str:
    """The state directory on the service's host (remote: absolute, or under the login dir)."""
    return op.state_dir(service)


def _log_path(op: Operation, service: str) -> str:
    return f"{_state_dir(op, service)}/logs/{service}.log"


async def _readiness(op: Operation, service: str, timeout: float = _PROBE_TIMEOUT_S) -> ProbeResult:
    url = await op.url(service, op.spec.service(service).readiness_path)
    return await probe(url, timeout=timeout)


async def _gate(
    op: Operation, record: PidRecord, *, fresh: bool = False
) -> tuple[str, dict[str, Any]]:
    """Wait for the service's readiness (see :func:`~servelab.io.processes.wait_ready`).

    ``fresh``: the record was just launched (its start command is waited for and progress told);
    otherwise the service was already running and only its readiness matters.
    """
    svc = op.spec.service(record.service)
    host = op.host(record.service)
    url = await op.url(record.service, svc.readiness_path)
    result = await wait_ready(
        host,
        record,
        url=url,
        ready_timeout_s=svc.ready_timeout_s,
        start_timeout_s=svc.start_timeout_s if fresh else 0.0,
        say=op.say if fresh else None,
    )
    return result.outcome, result.evidence


async def _env(op: Operation, service: str) -> dict[str, str]:
    """The env file's variables, as this operation last wrote the file (``knob set``), else read."""
    path = op.env_path(service)
    if path is None:
        return {}
    try:
        raw = op.written_env(service, path) or await op.host(service).read_file(path)
    except HostError as exc:
        raise ServiceStartError(f"{service}: cannot read its env file: {exc}") from exc
    return parse_envfile(raw.decode("utf-8", "replace"), source=path).as_dict()


async def _launch(op: Operation, service: str) -> PidRecord:
    svc = op.spec.service(service)
    host = op.host(service)
    argv = service_argv(op.spec, service, sys.executable)
    status_file = None if argv is not None else f"{_state_dir(op, service)}/run/{service}.status"
    record = await spawn(
        host,
        service=service,
        log=_log_path(op, service),
        env=await _env(op, service),
        argv=argv,
        command=None if argv is not None else svc.start,
        status_file=status_file,
        cwd=str(op.loaded.base_dir) if host.is_local else None,
        unit=svc.unit,
    )
    write_pid_record(op.loaded.state_dir, record)
    op.say(f"{service}: started pid {record.pid} on {host.name} (log {record.log})")
    return record


async def _adopt_service_pid(op: Operation, record: PidRecord) -> PidRecord:
    """After a launcher command returned, record the process really serving (unit or port)."""
    if record.command is None:
        return record
    host = op.host(record.service)
    pid = None
    if record.unit is not None:
        pid = await unit_main_pid(host, record.unit)
    if not pid:
        pid = await host.listening_pid(op.spec.service(record.service).port)
    stat = await proc_stat(host, pid) if pid else None
    if stat is None or stat.pgid == record.pgid:
        return record
    served = {"pid": stat.pid, "pgid": stat.pgid, "starttime": stat.starttime}
    adopted = replace(record, extra={**record.extra, "served_by": served})
    write_pid_record(op.loaded.state_dir, adopted)
    return adopted


async def _start(op: Operation, service: str) -> Step:
    started = time.monotonic()
    record = await _launch(op, service)
    try:
        outcome, evidence = await _gate(op, record, fresh=True)
    except (DeployError, asyncio.CancelledError):
        await _stop_recorded(op, service)
        raise
    record = await _adopt_service_pid(op, record)
    op.say(f"{service}: {outcome} in {time.monotonic() - started:.1f}s")
    return Step(service, outcome, record.pid, time.monotonic() - started, evidence)


async def _stop_recorded(op: Operation, service: str) -> str:
    """Stop the recorded process group (and the adopted serving one); drop the record."""
    record = read_pid_record(op.loaded.state_dir, service)
    if record is None:
        return "not running"
    host = op.host(service)
    grace = op.spec.service(service).stop_grace_s
    outcome = await stop_record(host, record, grace=grace)
    served = record.extra.get("served_by")
    if isinstance(served, dict):
        other = replace(
            record, pid=served["pid"], pgid=served["pgid"], starttime=served["starttime"]
        )
        second = await stop_record(host, other, grace=grace)
        outcome = outcome if second == "not running" else second
    remove_pid_record(op.loaded.state_dir, service)
    return outcome


async def _stop(op: Operation, service: str) -> Step:
    svc = op.spec.service(service)
    started = time.monotonic()
    evidence: dict[str, Any] = {}
    command = svc.stop or (f"systemctl stop {shlex.quote(svc.unit)}" if svc.unit else None)
    if command is not None:
        try:
            result = await op.host(service).run(command, timeout=svc.start_timeout_s)
            evidence["stop_command_exit"] = result.exit_status
        except CommandTimeout as exc:
            evidence["stop_command"] = str(exc)
    outcome = await _stop_recorded(op, service)
    if command is not None and outcome == "not running":
        outcome = "stopped"
    op.say(f"{service}: {outcome}")
    return Step(service, outcome, None, time.monotonic() - started, evidence)


async def _already_up(op: Operation, service: str) -> Step | None:
    """A Step when the service already runs and is ready; raises when its port is taken."""
    record = read_pid_record(op.loaded.state_dir, service)
    host = op.host(service)
    if record is not None and await is_alive(host, record):
        _outcome, evidence = await _gate(op, record)
        op.say(f"{service}: already up (pid {record.pid})")
        return Step(service, OUTCOME_ALREADY_UP, record.pid, 0.0, evidence)
    if record is not None:
        await _stop_recorded(op, service)  # a stale record (or an orphaned group)
    svc = op.spec.service(service)
    owner = await host.listening_pid(svc.port)
    if owner is None:
        return None
    answer = await _readiness(op, service)
    if answer.ok:
        op.say(f"{service}: already up (pid {owner}, not started by servelab)")
        return Step(
            service,
            OUTCOME_ALREADY_UP,
            owner,
            0.0,
            {"readiness": answer.to_json(), "pid_source": "port owner"},
        )
    raise ServiceStartError(
        f"{service}: port {svc.port} on {host.name} is held by pid {owner}, "
        f"which is not ready ({answer.describe()}); not starting over it"
    )


def _record(op: Operation, action: str, detail: dict[str, Any]) -> int | None:
    if op.ledger is None:
        return None
    return op.ledger.record_deployment(
        name=op.spec.name, spec_hash=spec_hash(op.spec), action=action, detail=detail
    )


async def up(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Start ``services`` (default: all) and their dependencies, in order, each gated."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        steps = await _up(op, services)
        report = DeployReport("up", steps)
        report.deployment_id = _record(op, "up", report.to_json())
    return report


async def _up(op: Operation, services: list[str] | None) -> list[Step]:
    steps: list[Step] = []
    started: list[str] = []
    try:
        for name in up_plan(op.spec, services):
            step = await _already_up(op, name)
            if step is None:
                step = await _start(op, name)
                started.append(name)
            steps.append(step)
    except (ServelabError, asyncio.CancelledError) as exc:
        op.say(f"up failed: {exc}; stopping what this run started")
        for name in reversed(started):
            await _stop(op, name)
        detail = {"ok": False, "error": str(exc), "steps": [s.to_json() for s in steps]}
        _record(op, "up", detail)
        raise
    return steps


async def down(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Stop ``services`` (default: all) and their dependents, dependents first. Idempotent."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        steps = [await _stop(op, name) for name in down_plan(op.spec, services)]
        report = DeployReport("down", steps)
        report.deployment_id = _record(op, "down", report.to_json())
    return report


async def _status_one(op: Operation, service: str) -> ServiceStatus:
    svc = op.spec.service(service)
    proc = await find_process(op.loaded, service, op.host(service))
    pid, alive = proc.pid, proc.pid is not None
    source: str | None = proc.source if alive else None
    record = read_pid_record(op.loaded.state_dir, service)
    if not alive and record is not None:  # recorded, but dead: shown as such
        pid, source = record.pid, "pid record"
    readiness = await _readiness(op, service, timeout=3.0)
    return ServiceStatus(service, svc.role, svc.host, svc.url, pid, source, alive, readiness)


async def status(target: SpecOrOperation) -> list[ServiceStatus]:
    """Every service: its process (:func:`~servelab.io.discovery.find_process`), url, readiness."""
    async with operation(target) as op:
        return list(await asyncio.gather(*(_status_one(op, n) for n in op.spec.services)))


async def _prepare_rollback(op: Operation, plan: list[str], report: RestartReport) -> None:
    """Before the restart: copy each env file aside (``NAME.pre-restart-STAMP`` in the service's
    backup directory under the state dir) and note the backup a rollback restores: the file's
    latest ``.bak-`` (the state before its last edit)."""
    for name in plan:
        path = op.env_path(name)
        if path is None:
            continue
        host, backups = op.host(name), op.backup_dir(name)
        copy = await save_copy(host, path, backups, kind="pre-restart")
        if copy is None:
            raise HostError(f"{host.name}: cannot read {path}: no such file")
        report.backups[name] = copy
        previous = await latest_backup(host, path, backups)
        if previous is not None:
            report.rollback_from[name] = previous


async def _restore_env_files(op: Operation, sources: dict[str, str]) -> None:
    for name, source in sources.items():
        path = op.env_path(name)
        assert path is not None
        data = await op.host(name).read_file(source)
        await op.write_env(name, path, data, backup=True)
        op.say(f"{name}: env file restored from {source}")


async def _co_restart(op: Operation, plan: list[str]) -> list[Step]:
    """Stop the plan dependents-first, then start it in order, each gated; stop at a failure."""
    for name in reversed(plan):
        await _stop(op, name)
    steps: list[Step] = []
    for name in plan:
        started = time.monotonic()
        try:
            steps.append(await _start(op, name))
        except DeployError as exc:
            op.say(f"{name}: failed: {exc}")
            steps.append(
                Step(name, OUTCOME_FAILED, None, time.monotonic() - started, {"error": str(exc)})
            )
            break
    return steps


async def restart(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    verify_after: bool = True,
    rollback: bool = False,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> RestartReport:
    """Co-restart ``services`` and their dependents, verify, and roll back when asked."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        plan = restart_plan(op.spec, services)
        report = RestartReport(plan, [])
        if rollback:
            await _prepare_rollback(op, plan, report)
        op.say(f"restart plan: {' -> '.join(plan)}")
        report.steps = await _co_restart(op, plan)
        if verify_after and all(step.ok for step in report.steps):
            report.verification = (await verify(op, plan)).to_json()
        if rollback and not report.ok and report.rollback_from:
            await _restore_env_files(op, report.rollback_from)
            report.rolled_back = True
            report.rollback_steps = await _co_restart(op, plan)
        report.deployment_id = _record(op, "restart", report.to_json())
    return report
