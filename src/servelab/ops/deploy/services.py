"""One service's process, for ``up``, ``down`` and ``restart`` (:mod:`servelab.ops.deploy.deploy`):
launch it and gate it on readiness, find it already up, stop it.

A service is found by its pid record, its systemd unit, and the owner of its port: every process
servelab launches carries its mark (:data:`~servelab.io.hosts.processes.SERVICE_MARK`), so the
process serving a service's port is known as servelab's even when its pid record is lost (a state
directory wiped, a command killed between the launch and the record). :func:`stop` stops what
serves the port when it carries the mark, and fails the step while something it launched still
serves; :func:`already_up` records such a process again instead of calling it a stranger. A port
held by a process without the mark is never touched, only named.

Every failure message that quotes a service's log has the service's env values redacted
(:func:`~servelab.core.redaction.redact`).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from servelab.core.deploy.events import (
    LaunchTimedOut,
    ServiceAlreadyUp,
    ServiceReady,
    ServiceStarted,
    ServiceStopped,
    StartCommandOutlived,
    StopFailed,
)
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.probe import ProbeResult
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
    UnrecordedStop,
)
from servelab.core.deploy.topology import service_argv
from servelab.core.knobs.rules import parse_env_bytes
from servelab.errors import CommandTimeout, HealthTimeout, HostError, ServiceStartError
from servelab.io.hosts.discovery import Ownership, owner_of, service_logs, unit_main_pid
from servelab.io.hosts.host import Host
from servelab.io.hosts.ownrecord import record_place
from servelab.io.hosts.place import make_place
from servelab.io.hosts.processes import (
    MARK_KEY,
    PidRecord,
    ProcStat,
    is_alive,
    proc_stat,
    service_log,
    spawn,
    spec_mark,
    stop_record,
)
from servelab.io.hosts.readiness import Readiness, wait_answering, wait_ready
from servelab.io.http.client import probe
from servelab.ops.context import Operation, Progress
from servelab.ops.deploy.collision import refuse_foreign, refuse_not_listing
from servelab.ops.deploy.dying import unless_stopping
from servelab.ops.deploy.launched import keep_record
from servelab.ops.deploy.ownership import forget_own, own_record, read_own, write_own
from servelab.ops.deploy.preflight import env_bytes
from servelab.ops.deploy.rollback import files_at_launch
from servelab.ops.deploy.workerport import others_router, refuse_router

if TYPE_CHECKING:  # every feature's events (ab, soak, case...): imported by what words them
    from servelab.core.progress import ProgressEvent

__all__ = ["already_up", "readiness", "start", "stop", "stop_safely", "tolerant"]

_PROBE_TIMEOUT_S = 5.0


def _log_path(op: Operation, service: str, at: str | None = None) -> str:
    """``logs/<service>.log``; kept aside (``at``, :func:`write_own`): ``<service>@<at>.log``."""
    return service_log(op.state_dir(service), service, at)


async def readiness(op: Operation, service: str, timeout: float = _PROBE_TIMEOUT_S) -> ProbeResult:
    """One probe of the service's readiness path."""
    url = await op.url(service, op.spec.readiness_path(service))
    return await probe(url, timeout=timeout)


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


def _ready(record: PidRecord, state: Readiness, start_timeout_s: float) -> Ready:
    """What the readiness gate saw, as the step's evidence."""
    log = f"{record.host}:{record.log}"
    if record.command is None:
        return Ready(state.last, state.probes, log)
    timeout = start_timeout_s if state.command_timed_out else None
    return CommandReady(
        state.last, state.probes, log, state.command_exit, state.foreground, timeout
    )


async def _gate(
    op: Operation, record: PidRecord, env: dict[str, str], *, fresh: bool = False
) -> tuple[Readiness, Ready]:
    """Wait for the service's readiness (see :func:`~servelab.io.hosts.readiness.wait_ready`);
    a failure quotes its log with ``env``'s values redacted.

    ``fresh``: the record was just launched (its start command is waited for and progress told);
    otherwise the service was already running and only its readiness matters.
    """
    svc = op.spec.service(record.service)
    host = op.host(record.service)
    url = await op.url(record.service, op.spec.readiness_path(record.service))
    start_timeout_s = svc.start_timeout_s if fresh else 0.0
    result = await wait_ready(
        host,
        record,
        url=url,
        ready_timeout_s=svc.ready_timeout_s,
        start_timeout_s=start_timeout_s,
        secrets=list(env.values()),
    )
    if fresh and result.command_timed_out:
        op.say(StartCommandOutlived(record.service, start_timeout_s))
    return result, _ready(record, result, start_timeout_s)


async def _launch(op: Operation, service: str, env: dict[str, str]) -> PidRecord:
    svc = op.spec.service(service)
    host = op.host(service)
    argv = service_argv(op.spec, service, sys.executable)
    if argv is not None and svc.config_file is not None and svc.role in ("prefill", "decode"):
        argv += ["--config", str(op.loaded.path(svc.config_file))]
    make_place(op.loaded.state_dir)  # the first launch from this folder makes its id (marks)
    # Another deployment's live record holds the service's place (a shared state folder): its
    # log and status file are kept aside too, under the service's address, as its record is.
    at = await record_place(host, op.loaded.state_dir, service, spec_mark(op.loaded, service))
    named = service if at is None else f"{service}@{at}"
    status_file = None if argv is not None else f"{op.state_dir(service)}/run/{named}.status"
    # The copies of the env and config files are taken before the launch: nothing that can fail
    # comes between the launch and its pid record, and a record that cannot be written stops the
    # process (keep_record). The config copy is what the process read (live_argument); both are
    # what restart --rollback puts back (servelab.ops.deploy.rollback).
    launched = await files_at_launch(op, service)
    record = await spawn(
        host,
        service=service,
        log=_log_path(op, service, at),
        env=env,
        argv=argv,
        command=None if argv is not None else svc.start,
        status_file=status_file,
        cwd=str(op.loaded.base_dir) if host.is_local else None,
        unit=svc.unit,
        args_env=svc.args_env if argv is not None else None,
        mark=spec_mark(op.loaded, service),
    )
    if launched:
        record = replace(record, extra={**record.extra, **launched})
    await keep_record(op, record)
    op.say(ServiceStarted(service, record.pid, host.name, record.log))
    return record


async def _launch_recorded(op: Operation, service: str, env: dict[str, str]) -> PidRecord:
    """:func:`_launch`, never cut between the launch and the pid record: cancelled meanwhile (a
    stop signal), the launch is finished and recorded first, then the cancellation goes on, so
    the caller's cleanup finds and stops the process (else it would run unrecorded and take the
    port from the next start: issue 38)."""
    launch = asyncio.ensure_future(_launch(op, service, env))
    try:
        return await asyncio.shield(launch)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await launch
        raise


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
    await keep_record(op, adopted)
    return adopted


def _serving_pid(record: PidRecord) -> int:
    served = record.extra.get("served_by")
    return int(served["pid"]) if isinstance(served, dict) else record.pid


async def start(op: Operation, service: str) -> Step:
    """Launch ``service`` and gate it on readiness. On any failure the caller stops it."""
    started = time.monotonic()
    env = await _env(op, service)
    try:
        record = await _launch_recorded(op, service, env)
    except CommandTimeout:
        return await _launch_timed_out(op, service, started)
    ready, evidence = await _gate(op, record, env, fresh=True)
    record = await _adopt_service_pid(op, record, foreground=ready.foreground)
    op.say(ServiceReady(service, ready.outcome, time.monotonic() - started))
    elapsed = time.monotonic() - started
    return Step(service, ready.outcome, _serving_pid(record), elapsed, evidence)


def _record_of(op: Operation, service: str, stat: ProcStat, why: str) -> PidRecord:
    """A pid record for a process servelab found serving ``service`` (``why``: how)."""
    svc = op.spec.service(service)
    return PidRecord(
        service=service,
        host=op.host(service).name,
        pid=stat.pid,
        pgid=stat.pgid,
        starttime=stat.starttime,
        log=_log_path(op, service),
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        command=svc.start,
        unit=svc.unit,
        extra={"adopted": why, MARK_KEY: spec_mark(op.loaded, service)},
    )


async def _launch_timed_out(op: Operation, service: str, started: float) -> Step:
    """The launch command itself timed out (an SSH session that would not close): readiness
    decides, as for a start command that outlives ``start_timeout_s``; the port's owner is
    recorded so ``down`` stops it."""
    svc = op.spec.service(service)
    host = op.host(service)
    url = await op.url(service, op.spec.readiness_path(service))
    op.say(LaunchTimedOut(service, host.name, url))
    ready = await wait_answering(url, ready_timeout_s=svc.ready_timeout_s)
    log = _log_path(op, service)
    if ready.last is None or not ready.last.ok:
        answer = ready.last.describe() if ready.last else "no probe answered"
        raise HealthTimeout(
            f"{service}: its launch command timed out and it is not ready after "
            f"{svc.ready_timeout_s}s at {url}; last probe: {answer}; log: {host.name}:{log}"
        )
    owner = await host.listening_pid(svc.port)
    stat = await proc_stat(host, owner) if owner else None
    if stat is not None:
        why = "port owner after the launch command timed out"
        await write_own(op, _record_of(op, service, stat, why))
    evidence = LaunchTimeoutReady(ready.last, ready.probes, f"{host.name}:{log}")
    outcome = StepOutcome.TIMED_OUT_HEALTHY
    op.say(ServiceReady(service, outcome, time.monotonic() - started))
    pid = stat.pid if stat is not None else None
    return Step(service, outcome, pid, time.monotonic() - started, evidence)


async def _stop_recorded(
    op: Operation, service: str
) -> tuple[StepOutcome, OthersRecord | None, str | None]:
    """Stop the recorded process group (and the adopted serving one); drop the record. Another
    deployment's record (a shared state folder) is left alone, returned. A record that cannot
    be removed (a read-only state folder) stays, stale: why is returned, the outcome kept."""
    record, others = await read_own(op, service)
    if record is None:
        return StepOutcome.NOT_RUNNING, others, None
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
    try:
        await forget_own(op, service)
    except OSError as exc:  # its processes are stopped: the record stays, stale (a dead pid)
        return outcome, None, f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    return outcome, None, None


async def _process_name(host: Host, pid: int) -> str | None:
    """The process's name (``/proc/PID/comm``: its executable's, never its arguments, which may
    hold a secret), or None when it cannot be read."""
    try:
        data = await host.read_file(f"/proc/{pid}/comm", limit=256)
    except HostError:
        return None
    return data.decode("utf-8", "replace").strip() or None


async def _marked_owner(op: Operation, service: str) -> tuple[int | None, Ownership]:
    """The pid listening on the service's port (None: none), and whose it is: this
    deployment's when it carries the service's mark or writes to the service's log
    (:func:`~servelab.io.hosts.discovery.owner_of`)."""
    host = op.host(service)
    owner = await host.listening_pid(op.spec.service(service).port)
    if owner is None:
        return None, Ownership.NOT_OURS
    logs = await service_logs(op.loaded, service, host)
    return owner, await owner_of(host, owner, spec_mark(op.loaded, service), logs)


async def _stop_unrecorded(
    op: Operation, service: str, evidence: Stopped
) -> tuple[StepOutcome, Stopped]:
    """Stop the process group of whatever still serves the service's port as this deployment's
    (its mark, or its output to the service's log) once its record's processes are stopped (its
    record was lost, or it left its group); a port owner proven not this deployment's is named in
    the evidence and left alone; one whose owner cannot be told is named and the step FAILED (it
    is not stopped, and the deployment is not down). FAILED while one of this deployment's still
    serves after that. Returns the outcome and ``evidence`` with what it saw."""
    owner, whose = await _marked_owner(op, service)
    if owner is None:
        return StepOutcome.NOT_RUNNING, evidence
    if whose is Ownership.UNKNOWN and await others_router(op, service, owner):
        whose = Ownership.NOT_OURS  # another deployment's router: named, left alone
    if whose is not Ownership.OURS:
        name = await _process_name(op.host(service), owner)
        if whose is Ownership.UNKNOWN:
            port = op.spec.service(service).port
            unproven = UnprovenOwner(owner, port, op.host(service).name, name)
            return StepOutcome.FAILED, replace(evidence, unproven_owner=unproven)
        return StepOutcome.NOT_RUNNING, replace(evidence, port_owner=PortOwner(owner, name=name))
    host = op.host(service)
    stat = await proc_stat(host, owner)
    if stat is None:  # it ended meanwhile
        return StepOutcome.NOT_RUNNING, evidence
    record = _record_of(op, service, stat, "port owner launched by servelab, not recorded")
    outcome = await stop_record(host, record, grace=op.spec.service(service).stop_grace_s)
    evidence = replace(evidence, unrecorded=UnrecordedStop(owner, stat.pgid, outcome))
    still, whose = await _marked_owner(op, service)
    if still is not None and whose is Ownership.OURS:
        return StepOutcome.FAILED, replace(evidence, still_serving=still)
    return outcome, evidence


async def stop(op: Operation, service: str) -> Step:
    """Stop ``service``: its ``stop`` command or systemd unit, its recorded processes, then
    whatever of servelab's still serves its port."""
    svc = op.spec.service(service)
    started = time.monotonic()
    evidence = Stopped()
    command = svc.stop or (f"systemctl stop {shlex.quote(svc.unit)}" if svc.unit else None)
    if command is not None:
        try:
            result = await op.host(service).run(command, timeout=svc.start_timeout_s)
            evidence = Stopped(stop_command_exit=result.exit_status)
        except CommandTimeout as exc:
            evidence = Stopped(stop_command=str(exc))
    outcome, others, stale = await _stop_recorded(op, service)
    evidence = replace(evidence, others_record=others, stale_record=stale)
    if command is not None and outcome is StepOutcome.NOT_RUNNING:
        outcome = StepOutcome.STOPPED
    left, evidence = await _stop_unrecorded(op, service, evidence)
    if left is StepOutcome.FAILED or outcome is StepOutcome.NOT_RUNNING:
        outcome = left
    op.say(ServiceStopped(service, outcome, stale))
    return Step(service, outcome, None, time.monotonic() - started, evidence)


def tolerant(say: Progress) -> Progress:
    """``say``, with any exception it raises swallowed (for cleanup paths)."""

    def tell(event: ProgressEvent) -> None:
        with contextlib.suppress(Exception):
            say(event)

    return tell


async def stop_safely(op: Operation, service: str) -> Step:
    """Stop ``service`` in a cleanup path (or on a host that may not answer): an error stopping
    it becomes its failed step, not raised."""
    started = time.monotonic()
    try:
        return await stop(op, service)
    except Exception as exc:
        op.say(StopFailed(service, str(exc)))
        failed = StepOutcome.FAILED
        return Step(service, failed, None, time.monotonic() - started, StepFailure(str(exc)))


async def already_up(op: Operation, service: str) -> Step | None:
    """A Step when the service already runs and is ready; raises when its port is taken by a
    process that is not ready. A ready process with the service's mark but no record (its record
    was lost) is recorded again, as servelab's. Another deployment's record is not adopted."""
    record = await own_record(op, service, say=True)
    host = op.host(service)
    if record is not None and await is_alive(host, record):
        gate = _gate(op, record, await _env(op, service))
        if (gated := await unless_stopping(op, record, gate)) is not None:  # None: it exited
            op.say(ServiceAlreadyUp(service, record.pid, by_servelab=True))
            return Step(service, StepOutcome.ALREADY_UP, record.pid, 0.0, gated)
    if record is not None:
        await _stop_recorded(op, service)  # a stale record (or an orphaned group)
    svc = op.spec.service(service)
    owner, whose = await _marked_owner(op, service)
    if owner is None:
        return None
    ours = whose is Ownership.OURS
    if not ours:
        await refuse_foreign(op, service, owner)
        await refuse_router(op, service, owner)
    answer = await readiness(op, service)
    if answer.ok:
        untold = None
        if not ours and svc.role == "router":
            untold = await refuse_not_listing(op, service, owner)
        stat = await proc_stat(host, owner) if ours else None
        if stat is not None:
            why = "port owner launched by servelab; its pid record was lost"
            await write_own(op, _record_of(op, service, stat, why))
        evidence = FoundServing(answer, recorded_again=True if stat is not None else None)
        op.say(ServiceAlreadyUp(service, owner, ours, recorded_again=ours, untold=untold))
        return Step(service, StepOutcome.ALREADY_UP, owner, 0.0, evidence)
    raise ServiceStartError(
        f"{service}: port {svc.port} on {host.name} is held by pid {owner}, "
        f"which is not ready ({answer.describe()}); not starting over it"
    )
