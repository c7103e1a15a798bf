"""Bring a deployment up, stop it, show its status, and restart it safely.

- :func:`up` starts services in dependency order, each gated on readiness (its ``readiness_path``
  polled until 200 or ``ready_timeout_s``; a process that exits meanwhile fails at once). Services
  already up and ready are skipped. On any failure (a service, Ctrl-C, a progress callback that
  raises) it stops what *it* started, the one that was starting too, in reverse order, records the
  failure in the ledger, and re-raises: :class:`~servelab.errors.HealthTimeout` or
  :class:`~servelab.errors.ServiceStartError` naming the service, its last probe answer and its
  log; cancelled, :class:`DeployInterrupted` carrying the report (which services it stopped).
- :func:`down` stops services in reverse dependency order through their process groups
  (SIGTERM, SIGKILL after ``stop_grace_s``), or their ``stop`` command / systemd unit. Idempotent.
- :func:`status` reports per service: pid (and where it came from), alive, url, readiness answer.
- :func:`restart` co-restarts the services and their dependents
  (:func:`~servelab.core.deploy.topology.restart_plan`). A timeout is not a failure by itself: a
  shell start command that outlives ``start_timeout_s``, or a launch command that times out (an SSH
  session that would not close), is judged by readiness, re-probed until ``ready_timeout_s``, and
  the step says "command timed out; service healthy" with the evidence. Then it verifies
  (:func:`servelab.ops.verify.verify.verify`) and, with ``rollback=True``, when the restart or its
  verification fails, restores each env file from its latest backup taken before the restart (the
  state before the last ``knob set``; the current file is first copied aside as
  ``PATH.pre-restart-STAMP``) and restarts again. Its report (and ledger row) names the services
  it left down and the command that brings them back (``servelab up -f SPEC``); cancelled, it
  raises :class:`DeployInterrupted` carrying that report.

A shell ``start`` command may return (``systemctl restart X``, a script that daemonizes) or stay
in the foreground (``python serve.py``): a service that is ready while its command still runs is
a foreground service, its serving pid (the port's owner) adopted at once, without waiting for
``start_timeout_s``. The command's process group is recorded either way, so ``down`` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.rolling import router_kind
from servelab.core.deploy.spec import spec_hash
from servelab.core.deploy.topology import down_plan, restart_plan, service_argv, up_plan
from servelab.core.knobs.rules import parse_env_bytes
from servelab.errors import (
    CommandTimeout,
    DeployError,
    HealthTimeout,
    HostError,
    ServelabError,
    ServiceStartError,
)
from servelab.io.hosts.discovery import find_process, unit_main_pid
from servelab.io.hosts.envfiles import latest_backup, save_copy
from servelab.io.hosts.processes import (
    PidRecord,
    is_alive,
    proc_stat,
    read_pid_record,
    remove_pid_record,
    spawn,
    stop_record,
    wait_answering,
    wait_ready,
    write_pid_record,
)
from servelab.io.http.client import HttpClient, ProbeResult, probe
from servelab.io.ledger.ledger import Ledger
from servelab.io.routerworkers import RouterWorker, router_workers
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.preflight import check_before_start, env_bytes
from servelab.ops.deploy.results import (
    DeployInterrupted,
    DeployReport,
    RestartReport,
    ServiceStatus,
    Step,
)
from servelab.ops.progress import (
    EnvFileRestored,
    LaunchTimedOut,
    ProgressEvent,
    RestartPlanned,
    ServiceAlreadyUp,
    ServiceFailed,
    ServiceReady,
    ServiceStarted,
    ServiceStopped,
    StartCommandOutlived,
    StopFailed,
    UpUndone,
)
from servelab.ops.verify.verify import verify

__all__ = ["down", "restart", "restart_service", "status", "up"]

_PROBE_TIMEOUT_S = 5.0


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
) -> tuple[StepOutcome, dict[str, Any]]:
    """Wait for the service's readiness (see :func:`~servelab.io.hosts.processes.wait_ready`).

    ``fresh``: the record was just launched (its start command is waited for and progress told);
    otherwise the service was already running and only its readiness matters.
    """
    svc = op.spec.service(record.service)
    host = op.host(record.service)
    url = await op.url(record.service, svc.readiness_path)
    start_timeout_s = svc.start_timeout_s if fresh else 0.0
    result = await wait_ready(
        host, record, url=url, ready_timeout_s=svc.ready_timeout_s, start_timeout_s=start_timeout_s
    )
    if fresh and result.command_timed_out:
        op.say(StartCommandOutlived(record.service, start_timeout_s))
    return result.outcome, result.evidence


async def _env(op: Operation, service: str) -> dict[str, str]:
    """The env file's variables, as this operation last wrote the file (``knob set``), else read."""
    path = op.env_path(service)
    if path is None:
        return {}
    try:
        raw = await env_bytes(op, service, path)
    except HostError as exc:
        raise ServiceStartError(f"{service}: cannot read its env file: {exc}") from exc
    return parse_env_bytes(raw, path).as_dict()


async def _launch(op: Operation, service: str) -> PidRecord:
    svc = op.spec.service(service)
    host = op.host(service)
    argv = service_argv(op.spec, service, sys.executable)
    if argv is not None and svc.config_file is not None and svc.role in ("prefill", "decode"):
        argv += ["--config", str(op.loaded.path(svc.config_file))]
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
        args_env=svc.args_env if argv is not None else None,
    )
    write_pid_record(op.loaded.state_dir, record)
    op.say(ServiceStarted(service, record.pid, host.name, record.log))
    return record


async def _adopt_service_pid(op: Operation, record: PidRecord, *, foreground: bool) -> PidRecord:
    """Record the process really serving (unit's MainPID, else the port's owner): one in another
    group (a launcher that returned), or, for a ``foreground`` command, its child in the group."""
    if record.command is None:
        return record
    host = op.host(record.service)
    pid = None
    if record.unit is not None:
        pid = await unit_main_pid(host, record.unit)
    if not pid:
        with contextlib.suppress(CommandTimeout):  # a slow host: keep the launcher's record
            pid = await host.listening_pid(op.spec.service(record.service).port)
    stat = await proc_stat(host, pid) if pid else None
    if stat is None or stat.pid == record.pid or (stat.pgid == record.pgid and not foreground):
        return record
    served = {"pid": stat.pid, "pgid": stat.pgid, "starttime": stat.starttime}
    adopted = replace(record, extra={**record.extra, "served_by": served})
    write_pid_record(op.loaded.state_dir, adopted)
    return adopted


def _serving_pid(record: PidRecord) -> int:
    served = record.extra.get("served_by")
    return int(served["pid"]) if isinstance(served, dict) else record.pid


async def _start(op: Operation, service: str) -> Step:
    """Launch ``service`` and gate it on readiness. On any failure the caller stops it."""
    started = time.monotonic()
    try:
        record = await _launch(op, service)
    except CommandTimeout:
        return await _launch_timed_out(op, service, started)
    outcome, evidence = await _gate(op, record, fresh=True)
    foreground = bool(evidence.get("foreground"))
    record = await _adopt_service_pid(op, record, foreground=foreground)
    op.say(ServiceReady(service, outcome, time.monotonic() - started))
    return Step(service, outcome, _serving_pid(record), time.monotonic() - started, evidence)


async def _launch_timed_out(op: Operation, service: str, started: float) -> Step:
    """The launch command itself timed out (an SSH session that would not close): readiness
    decides, as for a start command that outlives ``start_timeout_s``; the port's owner is
    recorded so ``down`` stops it."""
    svc = op.spec.service(service)
    host = op.host(service)
    url = await op.url(service, svc.readiness_path)
    op.say(LaunchTimedOut(service, host.name, url))
    readiness = await wait_answering(url, ready_timeout_s=svc.ready_timeout_s)
    log = _log_path(op, service)
    if readiness.last is None or not readiness.last.ok:
        answer = readiness.last.describe() if readiness.last else "no probe answered"
        raise HealthTimeout(
            f"{service}: its launch command timed out and it is not ready after "
            f"{svc.ready_timeout_s}s at {url}; last probe: {answer}; log: {host.name}:{log}"
        )
    owner = await host.listening_pid(svc.port)
    stat = await proc_stat(host, owner) if owner else None
    if stat is not None:
        record = PidRecord(
            service=service,
            host=host.name,
            pid=stat.pid,
            pgid=stat.pgid,
            starttime=stat.starttime,
            log=log,
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
            command=svc.start,
            unit=svc.unit,
            extra={"adopted": "port owner after the launch command timed out"},
        )
        write_pid_record(op.loaded.state_dir, record)
    evidence = {
        "readiness": readiness.last.to_json(),
        "probes": readiness.probes,
        "log": f"{host.name}:{log}",
        "launch_timed_out": True,
    }
    outcome = StepOutcome.TIMED_OUT_HEALTHY
    op.say(ServiceReady(service, outcome, time.monotonic() - started))
    pid = stat.pid if stat is not None else None
    return Step(service, outcome, pid, time.monotonic() - started, evidence)


async def _stop_recorded(op: Operation, service: str) -> StepOutcome:
    """Stop the recorded process group (and the adopted serving one); drop the record."""
    record = read_pid_record(op.loaded.state_dir, service)
    if record is None:
        return StepOutcome.NOT_RUNNING
    host = op.host(service)
    grace = op.spec.service(service).stop_grace_s
    outcome = await stop_record(host, record, grace=grace)
    served = record.extra.get("served_by")
    if isinstance(served, dict):
        other = replace(
            record, pid=served["pid"], pgid=served["pgid"], starttime=served["starttime"]
        )
        second = await stop_record(host, other, grace=grace)
        outcome = outcome if second is StepOutcome.NOT_RUNNING else second
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
    if command is not None and outcome is StepOutcome.NOT_RUNNING:
        outcome = StepOutcome.STOPPED
    op.say(ServiceStopped(service, outcome))
    return Step(service, outcome, None, time.monotonic() - started, evidence)


async def _already_up(op: Operation, service: str) -> Step | None:
    """A Step when the service already runs and is ready; raises when its port is taken."""
    record = read_pid_record(op.loaded.state_dir, service)
    host = op.host(service)
    if record is not None and await is_alive(host, record):
        _outcome, evidence = await _gate(op, record)
        op.say(ServiceAlreadyUp(service, record.pid, by_servelab=True))
        return Step(service, StepOutcome.ALREADY_UP, record.pid, 0.0, evidence)
    if record is not None:
        await _stop_recorded(op, service)  # a stale record (or an orphaned group)
    svc = op.spec.service(service)
    owner = await host.listening_pid(svc.port)
    if owner is None:
        return None
    answer = await _readiness(op, service)
    if answer.ok:
        op.say(ServiceAlreadyUp(service, owner, by_servelab=False))
        return Step(
            service,
            StepOutcome.ALREADY_UP,
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


async def _preflight(op: Operation, action: str, plan: list[str]) -> None:
    """:func:`~servelab.ops.deploy.preflight.check_before_start`; a failure is recorded, then
    raised."""
    try:
        await check_before_start(op, plan, restarting=action == "restart")
    except ServelabError as exc:
        _record(op, action, {"ok": False, "error": str(exc), "preflight": True, "steps": []})
        raise


async def up(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Start ``services`` (default: all) and their dependencies, in order, each gated."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        await _preflight(op, "up", up_plan(op.spec, services))
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
                started.append(name)  # before it runs: a failure midway stops it too
                step = await _start(op, name)
            steps.append(step)
    except BaseException as exc:  # whatever happened (a progress callback too): stop, record
        report = await _undo_up(op, steps, started, exc)
        if isinstance(exc, asyncio.CancelledError):
            raise DeployInterrupted(report) from exc
        raise
    return steps


async def _undo_up(
    op: Operation, steps: list[Step], started: list[str], exc: BaseException
) -> DeployReport:
    """Stop what this ``up`` started (newest first) and record the failure; never raises on the
    way (a progress callback that raises is ignored here: stopping comes first)."""
    safe = op.derive(progress=_tolerant(op.say))
    interrupted = isinstance(exc, asyncio.CancelledError)
    reason = "interrupted" if interrupted else (str(exc) or type(exc).__name__)
    # The error itself is told once, by whoever catches it; here only what is being undone.
    safe.say(UpUndone(interrupted, tuple(reversed(started))))
    stops = [await _stop_safely(safe, name) for name in reversed(started)]
    report = DeployReport("up", steps, error=reason, interrupted=interrupted)
    report.stopped = [step.service for step in stops]
    report.deployment_id = _record(op, "up", report.to_json())
    return report


def _tolerant(say: Progress) -> Progress:
    """``say``, with any exception it raises swallowed (for cleanup paths)."""

    def tell(event: ProgressEvent) -> None:
        with contextlib.suppress(Exception):
            say(event)

    return tell


async def _stop_safely(op: Operation, service: str) -> Step:
    """Stop ``service`` in a cleanup path: an error stopping it becomes its step, not raised."""
    started = time.monotonic()
    try:
        return await _stop(op, service)
    except Exception as exc:
        op.say(StopFailed(service, str(exc)))
        failed = StepOutcome.FAILED
        return Step(service, failed, None, time.monotonic() - started, {"error": str(exc)})


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
    """Every service: its process (:func:`~servelab.io.hosts.discovery.find_process`), url,
    readiness; each prefill and decode also whether the router lists it (and healthy), when the
    router's
    worker list can be read."""
    async with operation(target) as op:
        statuses = list(await asyncio.gather(*(_status_one(op, n) for n in op.spec.services)))
        listing = await _router_listing(op)
    if listing is not None:
        for item in statuses:
            if item.role in ("prefill", "decode"):
                seen = listing.get(item.url)
                item.in_router = seen is not None
                item.router_healthy = seen is not None and seen.healthy
    return statuses


async def _router_listing(op: Operation) -> dict[str, RouterWorker] | None:
    """The router's workers by URL; None without a router or when its list cannot be read."""
    router = op.spec.router_name
    if router is None:
        return None
    async with HttpClient() as http:
        try:
            api = router_workers(router_kind(op.spec), await op.url(router), http)
            return {worker.url: worker for worker in await api.list()}
        except ServelabError:
            return None


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
        op.say(EnvFileRestored(name, source))


async def _co_restart(op: Operation, plan: list[str], steps: list[Step], down: set[str]) -> None:
    """Stop the plan dependents-first, then start it in order, each gated; stop at a failure.

    ``steps`` gets each start's step as it ends; ``down`` holds, at every moment, the services
    stopped (or being stopped) and not yet started again."""
    for name in reversed(plan):
        down.add(name)
        await _stop(op, name)
    for name in plan:
        started = time.monotonic()
        try:
            step = await _start(op, name)
        except BaseException as exc:
            await _stop_safely(op.derive(progress=_tolerant(op.say)), name)
            if not isinstance(exc, DeployError):
                raise
            op.say(ServiceFailed(name, str(exc)))
            elapsed = time.monotonic() - started
            steps.append(Step(name, StepOutcome.FAILED, None, elapsed, {"error": str(exc)}))
            return
        down.discard(name)
        steps.append(step)


async def restart_service(op: Operation, service: str) -> Step:
    """Stop ``service`` and start it again alone (no dependent, no router), gated on readiness.

    A start that fails (:class:`~servelab.errors.DeployError`) is stopped again and returned as a
    failed step; the rolling restart (:mod:`servelab.ops.deploy.rolling`) uses this for one
    worker."""
    steps: list[Step] = []
    await _co_restart(op, [service], steps, set())
    return steps[0]


def _recovery(op: Operation) -> list[str]:
    """The command that brings the deployment's stopped services back."""
    return ["servelab", "up"] + ([] if op.loaded.embedded else ["-f", op.loaded.source])


async def restart(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    verify_after: bool = True,
    rollback: bool = False,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> RestartReport:
    """Co-restart ``services`` and their dependents, verify, and roll back when asked.

    The report (and its ledger row) names the services left down, if any, and the command that
    brings them back; cancelled (Ctrl-C), it raises :class:`DeployInterrupted` carrying it."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        plan = restart_plan(op.spec, services)
        await _preflight(op, "restart", plan)
        report = RestartReport(plan, [])
        down: set[str] = set()
        try:
            await _restart(op, report, down, verify_after=verify_after, rollback=rollback)
        except BaseException as exc:
            report.interrupted = isinstance(exc, asyncio.CancelledError)
            report.error = "interrupted" if report.interrupted else (str(exc) or type(exc).__name__)
            _note_down(op, report, down)
            report.deployment_id = _record(op, "restart", report.to_json())
            if report.interrupted:
                raise DeployInterrupted(report) from exc
            raise
        _note_down(op, report, down)
        report.deployment_id = _record(op, "restart", report.to_json())
    return report


async def _restart(
    op: Operation, report: RestartReport, down: set[str], *, verify_after: bool, rollback: bool
) -> None:
    plan = report.plan
    if rollback:
        await _prepare_rollback(op, plan, report)
    op.say(RestartPlanned(tuple(plan)))
    await _co_restart(op, plan, report.steps, down)
    if verify_after and all(step.ok for step in report.steps):
        report.verification = await verify(op, plan)
    if rollback and not report.ok and report.rollback_from:
        await _restore_env_files(op, report.rollback_from)
        report.rolled_back = True
        await _co_restart(op, plan, report.rollback_steps, down)


def _note_down(op: Operation, report: RestartReport, down: set[str]) -> None:
    report.down = [name for name in report.plan if name in down]
    report.recovery = _recovery(op) if report.down else []
