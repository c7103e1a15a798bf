"""Bring a deployment up, stop it, show its status, and restart it safely (one service's process:
:mod:`servelab.ops.deploy.services`).

- :func:`up` starts services in dependency order, each gated on readiness (its ``readiness_path``
  polled until 200 or ``ready_timeout_s``; a process that exits meanwhile fails at once). Services
  already up and ready are skipped (each declared knob it runs at another value than its file's
  warned about, with the restart that applies the file), except one behind which this ``up``
  started a service it depends on: it is restarted after it, as ``restart`` restarts a dependent
  (:func:`~servelab.core.deploy.topology.started_behind`; a router whose decode was killed kept
  its circuits open for 60 s, refusing every request while ``up`` said ok). On any failure (a
  service, Ctrl-C, a progress callback that raises) it stops what *it* started, the one that was
  starting too, in reverse order, records the failure in the ledger, and re-raises:
  :class:`~servelab.errors.HealthTimeout` or :class:`~servelab.errors.ServiceStartError`
  naming the service, its last probe answer and its log; cancelled, :class:`DeployInterrupted`
  carrying the report (which services it stopped).
- :func:`down` stops services in reverse dependency order through their process groups
  (SIGTERM, SIGKILL after ``stop_grace_s``), or their ``stop`` command / systemd unit, and then
  whatever servelab launched that still serves their ports. Idempotent. A host that does not
  answer fails its services' steps (never "not running" unseen); the others are still stopped.
- :func:`status` reports per service: pid (and where it came from), alive, url, readiness answer;
  a service on a host that does not answer is shown with the host's error, the others as usual.
- :func:`restart` co-restarts the services and their dependents
  (:func:`~servelab.core.deploy.topology.restart_plan`). A timeout is not a failure by itself: a
  shell start command that outlives ``start_timeout_s``, or a launch command that times out (an SSH
  session that would not close), is judged by readiness, re-probed until ``ready_timeout_s``, and
  the step says "command timed out; service healthy" with the evidence. Then it verifies
  (:func:`servelab.ops.verify.verify.verify`) and, with ``rollback=True``, when the restart or its
  verification fails, puts back each env file and config file as the running service was started
  from it (:mod:`servelab.ops.deploy.rollback`; the current file is first copied aside as
  ``NAME.pre-restart-STAMP``) and restarts again. Its report (and ledger row) names the services
  it left down and the command that brings them back (``servelab up -f SPEC``); cancelled, it
  raises :class:`DeployInterrupted` carrying that report; failing otherwise once it stopped
  services (a write, a host), :class:`RestartLeftDown` carrying it. Before anything stops (or,
  for ``up``, starts), the pre-flight also proves every place it writes writable
  (:mod:`servelab.ops.deploy.writable`).

A shell ``start`` command may return (``systemctl restart X``, a script that daemonizes) or stay
in the foreground (``python serve.py``): a service that is ready while its command still runs is
a foreground service, its serving pid (the port's owner) adopted at once, without waiting for
``start_timeout_s``. The command's process group is recorded either way, so ``down`` stops it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from servelab.core.deploy.contract import OTHERS_RECORD, UNREADABLE_RECORD, ServiceStatus
from servelab.core.deploy.events import (
    EnvFileRestored,
    KnobNotAsFile,
    RestartingBehind,
    RestartPlanned,
    RouterNotAsSpec,
    ServiceFailed,
    UpLeftServingDown,
    UpUndone,
)
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.record import DeploymentRecord, PreflightFailed
from servelab.core.deploy.rolling import router_kind
from servelab.core.deploy.spec import spec_hash
from servelab.core.deploy.steps import FoundServing, Step, StepFailure
from servelab.core.deploy.topology import down_plan, restart_plan, started_behind, up_plan
from servelab.core.deploy.whose import others_of
from servelab.core.ledger.codec import encode
from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.errors import DeployError, HostError, ServelabError
from servelab.io.hosts.discovery import find_process
from servelab.io.hosts.envfiles import MAX_FILE_BYTES
from servelab.io.hosts.ownrecord import read_own_record
from servelab.io.hosts.processes import pid_record_unreadable, spec_mark
from servelab.io.http.client import HttpClient
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.routerworkers import RouterWorker, router_workers
from servelab.ops.arguments import config_path
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.preflight import check_before_start
from servelab.ops.deploy.results import DeployInterrupted, RestartLeftDown
from servelab.ops.deploy.rollback import prepare_rollback
from servelab.ops.deploy.services import already_up, readiness, start, stop, stop_safely, tolerant
from servelab.ops.deploy.upcheck import recovery_up, still_serving
from servelab.ops.deploy.writable import check_writable
from servelab.ops.fileids import file_identities
from servelab.ops.knob import not_as_file
from servelab.ops.routerlaunch import router_launch
from servelab.ops.verify.layers.pair import pair_checks
from servelab.ops.verify.verify import verify

__all__ = ["down", "restart", "restart_service", "status", "up"]


def _record(
    op: Operation, action: str, report: DeployReport | RestartReport | PreflightFailed
) -> int | None:
    if op.ledger is None:
        return None
    return op.ledger.add(
        DeploymentRecord(
            id=0,
            at=NOW,
            name=op.spec.name,
            spec_hash=spec_hash(op.spec),
            action=action,
            detail=encode(report),
        )
    )


async def _preflight(
    op: Operation, action: str, plan: list[str], *, rollback: bool = False
) -> None:
    """:func:`~servelab.ops.deploy.preflight.check_before_start`, then
    :func:`~servelab.ops.deploy.writable.check_writable` (``up`` and ``restart``: before
    anything starts or stops); a failure is recorded, then raised."""
    try:
        await check_before_start(op, plan, restarting=action == "restart")
        await check_writable(op, plan, rollback=rollback)
    except ServelabError as exc:
        _record(op, action, PreflightFailed.of(str(exc)))
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
        if steps and all(step.ok for step in steps):
            ready = [step.service for step in steps]
            report.pair = await pair_checks(op, ready)  # once everything is ready
        report.deployment_id = _record(op, "up", report)
    return report


def _ours(step: Step | None) -> bool:
    """``step`` found a process of servelab's already up (its pid record, or its mark read
    again): one it may restart. A ready process without servelab's mark (an ``init`` spec's
    router) is left as found: servelab never stops it, so it is not restarted either."""
    if step is None:
        return False
    evidence = step.evidence
    return not (isinstance(evidence, FoundServing) and evidence.recorded_again is None)


async def _up(op: Operation, services: list[str] | None) -> list[Step]:
    steps: list[Step] = []
    started: list[str] = []
    serving: list[str] = []  # found serving, restarted behind: serving before this run
    try:
        for name in up_plan(op.spec, services):
            step = await already_up(op, name)
            behind = started_behind(op.spec, name, started) if _ours(step) else ()
            if behind:  # the one restart rule: restarted after what it depends on
                op.say(RestartingBehind(name, behind))
                started.append(name)
                serving.append(name)
                await stop(op, name)
                step = replace(await start(op, name), restarted_behind=tuple(behind))
            elif step is None:
                started.append(name)  # before it runs: a failure midway stops it too
                step = await start(op, name)
            else:
                await _warn_not_as_file(op, name)
                await _warn_router_not_as_spec(op, name)
            steps.append(step)
    except BaseException as exc:  # whatever happened (a progress callback too): stop, record
        report = await _undo_up(op, steps, started, exc, serving)
        if isinstance(exc, asyncio.CancelledError):
            raise DeployInterrupted(report) from exc
        raise
    return steps


async def _warn_not_as_file(op: Operation, name: str) -> None:
    """Warn, per knob, when ``name`` (found already up) runs another value than its file's
    (read as ``knob diff`` reads it), with the restart that applies the file."""
    if not op.spec.service(name).knobs:
        return
    fix = ("servelab", "restart", *op.loaded.spec_args, name)
    try:
        drifted = await not_as_file(op, name)
    except ServelabError:  # unreadable here: ``knob diff`` names why
        return
    for d in drifted:
        op.say(KnobNotAsFile(name, d.name, d.live, d.file, fix))


async def _warn_router_not_as_spec(op: Operation, name: str) -> None:
    """Warn when ``name``, a router found already up, was launched with other settings than its
    spec gives now (an edited router table), with the restart that applies them."""
    try:
        found = await router_launch(op, name)
    except ServelabError:  # unreadable here: ``verify`` names why
        return
    if found is not None and found.changes:
        fix = ("servelab", "restart", *op.loaded.spec_args, name)
        op.say(RouterNotAsSpec(name, found.changes, fix))


async def _undo_up(
    op: Operation, steps: list[Step], started: list[str], exc: BaseException, serving: list[str]
) -> DeployReport:
    """Stop what this ``up`` started (newest first) and record the failure; never raises on the
    way (a progress callback that raises is ignored here: stopping comes first). Those of
    ``serving`` (serving before the run, restarted behind) now down are said plainly."""
    safe = op.derive(progress=tolerant(op.say))
    interrupted = isinstance(exc, asyncio.CancelledError)
    reason = "interrupted" if interrupted else (str(exc) or type(exc).__name__)
    # The error itself is told once, by whoever catches it; here only what is being undone.
    safe.say(UpUndone(interrupted, tuple(reversed(started))))
    stops = [await stop_safely(safe, name) for name in reversed(started)]
    report = DeployReport("up", steps, error=reason, interrupted=interrupted)
    report.stopped = [step.service for step in stops]
    up_now = await still_serving(safe, set(serving))
    report.serving_before = [name for name in serving if name not in up_now]
    if report.serving_before:
        recovery = tuple(recovery_up(op.loaded))
        safe.say(UpLeftServingDown(tuple(report.serving_before), recovery))
    report.deployment_id = _record(op, "up", report)
    return report


async def down(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> DeployReport:
    """Stop ``services`` (default: all) and their dependents, dependents first. Idempotent.

    A ledger that cannot record it (a full disk) does not undo the stop: the report's ``error``
    says it was not recorded (the report fails)."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        steps = [await stop_safely(op, name) for name in down_plan(op.spec, services)]
        report = DeployReport("down", steps)
        try:
            report.deployment_id = _record(op, "down", report)
        except (ServelabError, OSError) as exc:
            report.error = f"not recorded in the ledger: {_cause(exc)}"
    return report


async def _status_one(op: Operation, service: str) -> ServiceStatus:
    svc = op.spec.service(service)
    shown = ServiceStatus(service, svc.role, svc.host, svc.url, None, None, False, None)
    try:
        proc = await find_process(op.loaded, service, op.host(service))
        answer = await readiness(op, service, timeout=3.0)
    except HostError as exc:  # its host does not answer: say so, show the others
        shown.error = str(exc)
        return shown
    shown.pid, shown.alive, shown.readiness = proc.pid, proc.pid is not None, answer
    if shown.alive:
        shown.pid_source, shown.unrecorded = proc.source, proc.unrecorded
        shown.other_deployment = proc.others
        if proc.others is not None:
            shown.others = others_of(proc.others, spec_mark(op.loaded, service))
    read = await read_own_record(
        op.host(service), op.loaded.state_dir, service, spec_mark(op.loaded, service)
    )
    if not shown.alive and read.record is not None:  # recorded, but dead: shown as such
        shown.pid, shown.pid_source = read.record.pid, "pid record"
    elif not shown.alive and read.other is not None:  # a shared state folder: not this one's
        shown.pid_source = f"{OTHERS_RECORD} ({read.other!r}, pid {read.other_pid})"
    elif not shown.alive and pid_record_unreadable(op.loaded.state_dir, service):
        shown.pid_source = UNREADABLE_RECORD  # "-" alone said nothing of it
    return shown


async def status(target: SpecOrOperation) -> list[ServiceStatus]:
    """Every service: its process (:func:`~servelab.io.hosts.discovery.find_process`), url,
    readiness; each prefill and decode also whether the router lists it (and healthy), when the
    router's worker list can be read. A service whose host does not answer carries its error."""
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


async def _restore_files(op: Operation, report: RestartReport) -> None:
    """Put back each env file and config file a rollback restores."""
    for name, source in report.rollback_from.items():
        path = op.env_path(name)
        assert path is not None
        await _restore(op, name, path, source)
    for name, source in report.config_rollback_from.items():
        path = config_path(op, name)
        assert path is not None
        await _restore(op, name, path, source)


async def _restore(op: Operation, name: str, path: str, source: str) -> None:
    data = await op.host(name).read_file(source, limit=MAX_FILE_BYTES)
    await op.write_env(name, path, data, backup=True)
    op.say(EnvFileRestored(name, source))


async def _co_restart(op: Operation, plan: list[str], steps: list[Step], down: set[str]) -> None:
    """Stop the plan dependents-first, then start it in order, each gated; stop at a failure.

    ``steps`` gets each start's step as it ends; ``down`` holds, at every moment, the services
    stopped (or being stopped) and not yet started again."""
    for name in reversed(plan):
        down.add(name)
        await stop(op, name)
    for name in plan:
        started = time.monotonic()
        try:
            step = await start(op, name)
        except BaseException as exc:
            await stop_safely(op.derive(progress=tolerant(op.say)), name)
            if not isinstance(exc, DeployError):
                raise
            op.say(ServiceFailed(name, str(exc)))
            elapsed = time.monotonic() - started
            steps.append(Step(name, StepOutcome.FAILED, None, elapsed, StepFailure(str(exc))))
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
        plan = restart_plan(op.spec, services, await file_identities(op))
        await _preflight(op, "restart", plan, rollback=rollback)
        report = RestartReport(plan, [])
        down: set[str] = set()
        try:
            await _restart(op, report, down, verify_after=verify_after, rollback=rollback)
        except BaseException as exc:
            report.interrupted = isinstance(exc, asyncio.CancelledError)
            report.error = "interrupted" if report.interrupted else _cause(exc)
            down -= await still_serving(op, down)
            _note_down(op, report, down)
            _record_restart(op, report)
            if report.interrupted:
                raise DeployInterrupted(report) from exc
            if report.down and isinstance(exc, Exception):  # never a raw OSError: say what is down
                raise RestartLeftDown(report) from exc
            raise
        _note_down(op, report, down)
        if not _record_restart(op, report):
            raise RestartLeftDown(report)
    return report


def _cause(exc: BaseException) -> str:
    """What went wrong, in one line (an OS error as ``PATH: what``, without its errno)."""
    if isinstance(exc, OSError) and not isinstance(exc, ServelabError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def _record_restart(op: Operation, report: RestartReport) -> bool:
    """Record the restart in the ledger; False when that failed while services are down (the
    report's ``error`` says it), raising only when nothing is down."""
    try:
        report.deployment_id = _record(op, "restart", report)
    except (ServelabError, OSError) as exc:
        if not report.down:
            raise
        unrecorded = f"not recorded in the ledger: {_cause(exc)}"
        report.error = unrecorded if report.error is None else f"{report.error}; {unrecorded}"
        return False
    return True


async def _restart(
    op: Operation, report: RestartReport, down: set[str], *, verify_after: bool, rollback: bool
) -> None:
    plan = report.plan
    if rollback:
        await prepare_rollback(op, plan, report)
    op.say(RestartPlanned(tuple(plan)))
    await _co_restart(op, plan, report.steps, down)
    if verify_after and all(step.ok for step in report.steps):
        report.verification = await verify(op, plan)
    if rollback and not report.ok and (report.rollback_from or report.config_rollback_from):
        await _restore_files(op, report)
        report.rolled_back = True
        await _co_restart(op, plan, report.rollback_steps, down)


def _note_down(op: Operation, report: RestartReport, down: set[str]) -> None:
    report.down = [name for name in report.plan if name in down]
    report.recovery = recovery_up(op.loaded) if report.down else []
