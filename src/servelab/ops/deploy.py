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
import contextlib
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from servelab.io.hosts import Host, backup_name, host_for
from servelab.io.http import ProbeResult, probe
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
from servelab.io.specfile import LoadedSpec

if TYPE_CHECKING:
    from servelab.io.store import Ledger

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

Progress = Callable[[str], None]

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


class _Context:
    """One operation's hosts (opened once, closed at the end), progress and paths."""

    def __init__(self, loaded: LoadedSpec, progress: Progress | None) -> None:
        self.loaded = loaded
        self.spec = loaded.spec
        self.say: Progress = progress or (lambda _msg: None)
        self._hosts: dict[str, Host] = {}

    def host(self, service: str) -> Host:
        name = self.spec.service(service).host
        if name not in self._hosts:
            self._hosts[name] = host_for(name, self.spec.hosts[name])
        return self._hosts[name]

    def state_dir(self, service: str) -> str:
        """The state directory on the service's host (remote: absolute, or under the login dir)."""
        if self.host(service).is_local:
            return str(self.loaded.state_dir)
        configured = Path(self.spec.state_dir)
        return str(configured) if configured.is_absolute() else f".servelab/{self.spec.name}"

    def log_path(self, service: str) -> str:
        return f"{self.state_dir(service)}/logs/{service}.log"

    def env_path(self, service: str) -> str | None:
        path = self.loaded.env_file(service)
        return None if path is None else str(path)

    async def aclose(self) -> None:
        for host in self._hosts.values():
            with contextlib.suppress(ServelabError, OSError):
                await host.aclose()


async def _readiness(ctx: _Context, service: str, timeout: float = _PROBE_TIMEOUT_S) -> ProbeResult:
    svc = ctx.spec.service(service)
    url = await ctx.host(service).http_url(svc.url + svc.readiness_path)
    return await probe(url, timeout=timeout)


async def _gate(
    ctx: _Context, record: PidRecord, *, fresh: bool = False
) -> tuple[str, dict[str, Any]]:
    """Wait for the service's readiness (see :func:`~servelab.io.processes.wait_ready`).

    ``fresh``: the record was just launched (its start command is waited for and progress told);
    otherwise the service was already running and only its readiness matters.
    """
    svc = ctx.spec.service(record.service)
    host = ctx.host(record.service)
    url = await host.http_url(svc.url + svc.readiness_path)
    result = await wait_ready(
        host,
        record,
        url=url,
        ready_timeout_s=svc.ready_timeout_s,
        start_timeout_s=svc.start_timeout_s if fresh else 0.0,
        say=ctx.say if fresh else None,
    )
    return result.outcome, result.evidence


async def _env(ctx: _Context, service: str) -> dict[str, str]:
    path = ctx.env_path(service)
    if path is None:
        return {}
    try:
        raw = await ctx.host(service).read_file(path)
    except HostError as exc:
        raise ServiceStartError(f"{service}: cannot read its env file: {exc}") from exc
    return parse_envfile(raw.decode("utf-8", "replace"), source=path).as_dict()


async def _launch(ctx: _Context, service: str) -> PidRecord:
    svc = ctx.spec.service(service)
    host = ctx.host(service)
    argv = service_argv(ctx.spec, service, sys.executable)
    status_file = None if argv is not None else f"{ctx.state_dir(service)}/run/{service}.status"
    record = await spawn(
        host,
        service=service,
        log=ctx.log_path(service),
        env=await _env(ctx, service),
        argv=argv,
        command=None if argv is not None else svc.start,
        status_file=status_file,
        cwd=str(ctx.loaded.base_dir) if host.is_local else None,
        unit=svc.unit,
    )
    write_pid_record(ctx.loaded.state_dir, record)
    ctx.say(f"{service}: started pid {record.pid} on {host.name} (log {record.log})")
    return record


async def _unit_main_pid(host: Host, unit: str) -> int | None:
    """The unit's MainPID (None when systemd reports 0 or cannot be asked)."""
    try:
        result = await host.run(
            f"systemctl show -p MainPID --value {shlex.quote(unit)}", timeout=30
        )
    except CommandTimeout:
        return None
    text = result.stdout.strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


async def _adopt_service_pid(ctx: _Context, record: PidRecord) -> PidRecord:
    """After a launcher command returned, record the process really serving (unit or port)."""
    if record.command is None:
        return record
    host = ctx.host(record.service)
    pid = None
    if record.unit is not None:
        pid = await _unit_main_pid(host, record.unit)
    if not pid:
        pid = await host.listening_pid(ctx.spec.service(record.service).port)
    stat = await proc_stat(host, pid) if pid else None
    if stat is None or stat.pgid == record.pgid:
        return record
    served = {"pid": stat.pid, "pgid": stat.pgid, "starttime": stat.starttime}
    adopted = replace(record, extra={**record.extra, "served_by": served})
    write_pid_record(ctx.loaded.state_dir, adopted)
    return adopted


async def _start(ctx: _Context, service: str) -> Step:
    started = time.monotonic()
    record = await _launch(ctx, service)
    try:
        outcome, evidence = await _gate(ctx, record, fresh=True)
    except (DeployError, asyncio.CancelledError):
        await _stop_recorded(ctx, service)
        raise
    record = await _adopt_service_pid(ctx, record)
    ctx.say(f"{service}: {outcome} in {time.monotonic() - started:.1f}s")
    return Step(service, outcome, record.pid, time.monotonic() - started, evidence)


async def _stop_recorded(ctx: _Context, service: str) -> str:
    """Stop the recorded process group (and the adopted serving one); drop the record."""
    record = read_pid_record(ctx.loaded.state_dir, service)
    if record is None:
        return "not running"
    host = ctx.host(service)
    grace = ctx.spec.service(service).stop_grace_s
    outcome = await stop_record(host, record, grace=grace)
    served = record.extra.get("served_by")
    if isinstance(served, dict):
        other = replace(
            record, pid=served["pid"], pgid=served["pgid"], starttime=served["starttime"]
        )
        second = await stop_record(host, other, grace=grace)
        outcome = outcome if second == "not running" else second
    remove_pid_record(ctx.loaded.state_dir, service)
    return outcome


async def _stop(ctx: _Context, service: str) -> Step:
    svc = ctx.spec.service(service)
    started = time.monotonic()
    evidence: dict[str, Any] = {}
    command = svc.stop or (f"systemctl stop {shlex.quote(svc.unit)}" if svc.unit else None)
    if command is not None:
        try:
            result = await ctx.host(service).run(command, timeout=svc.start_timeout_s)
            evidence["stop_command_exit"] = result.exit_status
        except CommandTimeout as exc:
            evidence["stop_command"] = str(exc)
    outcome = await _stop_recorded(ctx, service)
    if command is not None and outcome == "not running":
        outcome = "stopped"
    ctx.say(f"{service}: {outcome}")
    return Step(service, outcome, None, time.monotonic() - started, evidence)


async def _already_up(ctx: _Context, service: str) -> Step | None:
    """A Step when the service already runs and is ready; raises when its port is taken."""
    record = read_pid_record(ctx.loaded.state_dir, service)
    host = ctx.host(service)
    if record is not None and await is_alive(host, record):
        _outcome, evidence = await _gate(ctx, record)
        ctx.say(f"{service}: already up (pid {record.pid})")
        return Step(service, OUTCOME_ALREADY_UP, record.pid, 0.0, evidence)
    if record is not None:
        await _stop_recorded(ctx, service)  # a stale record (or an orphaned group)
    svc = ctx.spec.service(service)
    owner = await host.listening_pid(svc.port)
    if owner is None:
        return None
    answer = await _readiness(ctx, service)
    if answer.ok:
        ctx.say(f"{service}: already up (pid {owner}, not started by servelab)")
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


def _record(
    ledger: Ledger | None, loaded: LoadedSpec, action: str, detail: dict[str, Any]
) -> int | None:
    if ledger is None:
        return None
    return ledger.record_deployment(
        name=loaded.spec.name, spec_hash=spec_hash(loaded.spec), action=action, detail=detail
    )


async def up(
    loaded: LoadedSpec,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Start ``services`` (default: all) and their dependencies, in order, each gated."""
    ctx = _Context(loaded, progress)
    steps: list[Step] = []
    started: list[str] = []
    try:
        for name in up_plan(loaded.spec, services):
            step = await _already_up(ctx, name)
            if step is None:
                step = await _start(ctx, name)
                started.append(name)
            steps.append(step)
    except (ServelabError, asyncio.CancelledError) as exc:
        ctx.say(f"up failed: {exc}; stopping what this run started")
        for name in reversed(started):
            await _stop(ctx, name)
        _record(
            ledger,
            loaded,
            "up",
            {"ok": False, "error": str(exc), "steps": [s.to_json() for s in steps]},
        )
        raise
    finally:
        await ctx.aclose()
    report = DeployReport("up", steps)
    report.deployment_id = _record(ledger, loaded, "up", report.to_json())
    return report


async def down(
    loaded: LoadedSpec,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Stop ``services`` (default: all) and their dependents, dependents first. Idempotent."""
    ctx = _Context(loaded, progress)
    try:
        steps = [await _stop(ctx, name) for name in down_plan(loaded.spec, services)]
    finally:
        await ctx.aclose()
    report = DeployReport("down", steps)
    report.deployment_id = _record(ledger, loaded, "down", report.to_json())
    return report


async def _status_one(ctx: _Context, service: str) -> ServiceStatus:
    svc = ctx.spec.service(service)
    host = ctx.host(service)
    record = read_pid_record(ctx.loaded.state_dir, service)
    pid, source, alive = None, None, False
    if record is not None:
        pid, source, alive = record.pid, "pid record", await is_alive(host, record)
    if not alive and svc.unit is not None:
        main_pid = await _unit_main_pid(host, svc.unit)
        if main_pid:
            pid, source, alive = main_pid, "systemd MainPID", True
    if not alive:
        owner = await host.listening_pid(svc.port)
        if owner is not None:
            pid, source, alive = owner, "port owner", True
    readiness = await _readiness(ctx, service, timeout=3.0)
    return ServiceStatus(service, svc.role, svc.host, svc.url, pid, source, alive, readiness)


async def status(loaded: LoadedSpec) -> list[ServiceStatus]:
    """Every service: pid (record, else port owner), alive, url, readiness answer."""
    ctx = _Context(loaded, None)
    try:
        return list(await asyncio.gather(*(_status_one(ctx, n) for n in loaded.spec.services)))
    finally:
        await ctx.aclose()


async def _prepare_rollback(ctx: _Context, plan: list[str], report: RestartReport) -> None:
    """Before the restart: copy each env file aside (``PATH.pre-restart-STAMP``) and note the
    backup a rollback restores: the file's latest ``.bak-`` (the state before its last edit)."""
    from servelab.ops.knob import latest_backup  # the knob commands own the backup naming

    for name in plan:
        path = ctx.env_path(name)
        if path is None:
            continue
        host = ctx.host(name)
        copy = backup_name(path).replace(".bak-", ".pre-restart-")
        await host.write_file_atomic(copy, await host.read_file(path), backup=False)
        report.backups[name] = copy
        previous = await latest_backup(host, path)
        if previous is not None:
            report.rollback_from[name] = previous


async def _restore_env_files(ctx: _Context, sources: dict[str, str]) -> None:
    for name, source in sources.items():
        path = ctx.env_path(name)
        assert path is not None
        host = ctx.host(name)
        await host.write_file_atomic(path, await host.read_file(source), backup=True)
        ctx.say(f"{name}: env file restored from {source}")


async def _co_restart(ctx: _Context, plan: list[str]) -> list[Step]:
    """Stop the plan dependents-first, then start it in order, each gated; stop at a failure."""
    for name in reversed(plan):
        await _stop(ctx, name)
    steps: list[Step] = []
    for name in plan:
        started = time.monotonic()
        try:
            steps.append(await _start(ctx, name))
        except DeployError as exc:
            ctx.say(f"{name}: failed: {exc}")
            steps.append(
                Step(name, OUTCOME_FAILED, None, time.monotonic() - started, {"error": str(exc)})
            )
            break
    return steps


async def _verify(
    loaded: LoadedSpec, plan: list[str], ledger: Ledger | None, progress: Progress | None
) -> dict[str, Any]:
    from servelab.ops.verify import verify  # lazily: verify builds on this layer's neighbours

    report = await verify(loaded, plan, ledger=ledger, progress=progress)
    return report.to_json()


async def restart(
    loaded: LoadedSpec,
    services: list[str] | None = None,
    *,
    verify_after: bool = True,
    rollback: bool = False,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> RestartReport:
    """Co-restart ``services`` and their dependents, verify, and roll back when asked."""
    ctx = _Context(loaded, progress)
    plan = restart_plan(loaded.spec, services)
    report = RestartReport(plan, [])
    try:
        if rollback:
            await _prepare_rollback(ctx, plan, report)
        ctx.say(f"restart plan: {' -> '.join(plan)}")
        report.steps = await _co_restart(ctx, plan)
        if verify_after and all(step.ok for step in report.steps):
            report.verification = await _verify(loaded, plan, ledger, progress)
        if rollback and not report.ok and report.rollback_from:
            await _restore_env_files(ctx, report.rollback_from)
            report.rolled_back = True
            report.rollback_steps = await _co_restart(ctx, plan)
    finally:
        await ctx.aclose()
    report.deployment_id = _record(ledger, loaded, "restart", report.to_json())
    return report
