"""``restart --rolling``: restart workers one at a time, without taking the deployment down.

For each worker of :func:`~servelab.core.deploy.rolling.rolling_plan`, in order (the phases of
:class:`~servelab.core.deploy.rolling.RollPhase`):

1. **remove** it from the router (its id read from the router's worker list; refused when no other
   healthy worker of its role is listed), and wait until the router no longer lists it;
2. **drain**: wait until its ``/get_load`` reports no running or queued request (bounded);
3. **restart** it alone (:func:`servelab.ops.deploy.deploy.restart_service`: no dependent, no
router),
   gated on readiness;
4. **verify** it: verify's live and health layers for this worker (the env file's knobs are live);
5. **add** it back (with its bootstrap port for a prefill) and wait until it is listed healthy;
6. **routed**: send small requests through the router until the worker's own counter of finished
   requests grows (SGLang's ``sglang:num_requests_total``, vLLM's ``vllm:request_success_total``:
   :func:`servelab.core.verify.served.engine_count`; without it, the router's listing is the
   evidence).

Before the first worker is taken out, the pre-flights run (the ports and files each worker needs,
:mod:`servelab.ops.deploy.preflight`, and every place the roll writes,
:mod:`servelab.ops.deploy.writable`: a refusal changes nothing). The first phase that fails stops
the roll: the report names the worker left out of the router,
whether it is down, and the commands that put it back. Cancelled (Ctrl-C), it raises
:class:`~servelab.ops.deploy.results.DeployInterrupted` carrying the report. The roll is recorded
in the ledger as a ``restart --rolling`` deployment.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from servelab.core.deploy.events import RollingPlanned, RollPhaseFailed, RollPhaseStarted
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.deploy.rolling import (
    RollOptions,
    RollPhase,
    RollTarget,
    rolling_plan,
    router_kind,
    running_requests,
)
from servelab.core.deploy.spec import spec_hash
from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import CheckCode
from servelab.core.verify.served import engine_count
from servelab.errors import RouterApiError, ServelabError
from servelab.io.http.client import HttpClient
from servelab.io.http.models import listed_model
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.routerworkers import (
    RouterWorker,
    RouterWorkers,
    add_worker_json,
    router_workers,
)
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.deploy import restart_service
from servelab.ops.deploy.preflight import check_before_start
from servelab.ops.deploy.results import DeployInterrupted
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
from servelab.ops.deploy.writable import check_writable
from servelab.ops.verify.e2e import probe_body
from servelab.ops.verify.verify import verify

__all__ = ["rolling_restart"]

_Outcome = tuple[bool, PhaseData]
_T = TypeVar("_T")


class _Roll:
    """One rolling restart's shared state: the operation, the router's API, the options."""

    def __init__(
        self, op: Operation, api: RouterWorkers, http: HttpClient, opts: RollOptions, model: str
    ) -> None:
        self.op, self.api, self.http, self.opts = op, api, http, opts
        #: The model the router lists: its routed probes name it (never a placeholder).
        self.model = model

    async def until(
        self, check: Callable[[], Awaitable[tuple[bool, _T]]], timeout_s: float
    ) -> tuple[bool, _T, int]:
        """Poll ``check`` until it is ok or ``timeout_s`` passes: its last answer, the polls."""
        deadline = time.monotonic() + timeout_s
        polls = 0
        while True:
            polls += 1
            ok, seen = await check()
            if ok or time.monotonic() >= deadline:
                return ok, seen, polls
            await asyncio.sleep(self.opts.poll_s)

    async def listed(self, target: RollTarget) -> list[RouterWorker]:
        return [w for w in await self.api.list() if w.url == target.url.rstrip("/")]


async def _remove(roll: _Roll, target: RollTarget) -> _Outcome:
    workers = await roll.api.list()
    mine = [w for w in workers if w.url == target.url]
    others = [w for w in workers if w.role == target.role and w.url != target.url and w.healthy]
    ids, urls = tuple(w.id for w in mine), tuple(w.url for w in others)
    if not others:
        return False, RemoveRefused(ids, urls)
    if not mine:
        return True, AlreadyOut(ids, urls)
    for worker in mine:
        await roll.api.remove(worker.id)

    async def gone() -> tuple[bool, None]:
        return not await roll.listed(target), None

    timeout_s = roll.opts.router_timeout_s
    ok, _, polls = await roll.until(gone, timeout_s)
    return ok, Removed(ids, urls, polls, timeout_s, None if ok else PhaseFailure.STILL_LISTED)


async def _drain(roll: _Roll, target: RollTarget) -> _Outcome:
    url = await roll.op.url(target.service, "/get_load")

    async def idle() -> tuple[bool, int | None]:
        running = running_requests(await roll.http.get_json(url, timeout=15.0))
        return running == 0, running

    timeout_s = roll.opts.drain_timeout_s
    ok, running, polls = await roll.until(idle, timeout_s)
    failed = PhaseFailure.LOAD_UNREADABLE if running is None else PhaseFailure.NOT_DRAINED
    return ok, Drained(running, polls, timeout_s, None if ok else failed)


async def _restart(roll: _Roll, target: RollTarget) -> _Outcome:
    step = await restart_service(roll.op, target.service)
    return step.ok, Restarted(step)


async def _add(roll: _Roll, target: RollTarget) -> _Outcome:
    worker_id = await roll.api.add(target.url, target.role, target.bootstrap_port)

    async def healthy() -> tuple[bool, tuple[RouterWorker, ...]]:
        listed = await roll.listed(target)
        return any(w.healthy for w in listed), tuple(listed)

    timeout_s = roll.opts.router_timeout_s
    ok, listed, polls = await roll.until(healthy, timeout_s)
    reason = None if ok else PhaseFailure.NOT_LISTED
    return ok, Added(worker_id, listed, polls, timeout_s, reason)


async def _served(roll: _Roll, target: RollTarget) -> int | None:
    url = await roll.op.url(target.service, "/metrics")
    got = await roll.http.probe(url, timeout=15.0, body_limit=None)
    return engine_count(got.body if got.status == 200 else None)


async def _routed(roll: _Roll, target: RollTarget, router_url: str) -> _Outcome:
    before = await _served(roll, target)
    if before is None:
        return True, RoutedByListing()
    model = roll.model
    sent: list[int | None] = []

    async def grew() -> tuple[bool, int | None]:
        body = probe_body(model, "servelab rolling probe", len(sent))  # no two alike
        result = await roll.http.probe(
            router_url + "/v1/chat/completions", timeout=30.0, method="POST", json_body=body
        )
        sent.append(result.status)
        after = await _served(roll, target)
        return after is not None and after > before, after

    timeout_s = roll.opts.routed_timeout_s
    ok, after, polls = await roll.until(grew, timeout_s)
    reason = None if ok else PhaseFailure.NOT_ROUTED
    return ok, RoutedByCount(before, after, polls, timeout_s, tuple(sent), reason)


async def _verify(roll: _Roll, worker: WorkerRoll) -> _Outcome:
    report = await verify(roll.op, [worker.service], layers=("live", "pair", "health"))
    worker.verification = report
    # a pair the engines do not describe is said in the report; only a mismatch stops the roll
    failures = [check for check in report.failures if check.code is not CheckCode.PAIR_UNKNOWN]
    return not failures, Verified(tuple(check.code for check in failures))


async def _phase(
    roll: _Roll, worker: WorkerRoll, name: RollPhase, run: Awaitable[_Outcome]
) -> bool:
    roll.op.say(RollPhaseStarted(worker.service, name))
    started = time.monotonic()
    try:
        ok, data = await run
    except ServelabError as exc:
        ok, data = False, PhaseError(f"{type(exc).__name__}: {exc}")
    worker.phases.append(Phase(name, ok, time.monotonic() - started, data))
    if not ok:
        roll.op.say(RollPhaseFailed(worker.service, name))
    return ok


async def _roll_one(roll: _Roll, worker: WorkerRoll, router_url: str) -> bool:
    target = worker.target
    steps: list[tuple[RollPhase, Callable[[], Awaitable[_Outcome]]]] = [
        (RollPhase.REMOVE, lambda: _remove(roll, target)),
        (RollPhase.DRAIN, lambda: _drain(roll, target)),
        (RollPhase.RESTART, lambda: _restart(roll, target)),
        (RollPhase.VERIFY, lambda: _verify(roll, worker)),
        (RollPhase.ADD, lambda: _add(roll, target)),
        (RollPhase.ROUTED, lambda: _routed(roll, target, router_url)),
    ]
    for name, run in steps:
        if not await _phase(roll, worker, name, run()):
            return False
    return True


def _recovery(op: Operation, report: RollingReport, target: RollTarget) -> list[list[str]]:
    """Put the worker back: roll it again (restarts it if down, adds it back), or, when it is
    up, add it to the router by hand."""
    spec = [] if op.loaded.embedded else ["-f", op.loaded.source]
    commands = [["servelab", "restart", "--rolling", target.service, *spec]]
    if not report.down:
        body = add_worker_json(target.url, target.role, target.bootstrap_port)
        router = op.spec.service(report.router).url
        commands.append(["curl", "-sS", "-X", "POST", f"{router}/workers", "-H",
                         "Content-Type: application/json", "-d", body])  # fmt: skip
    return commands


def _note_out(op: Operation, report: RollingReport) -> None:
    for worker in report.workers:
        if worker.out_of_router or worker.down:
            report.out, report.down = worker.service, worker.down
            report.recovery = _recovery(op, report, worker.target)
            return


async def _run(op: Operation, report: RollingReport, opts: RollOptions) -> None:
    report.router_url = await op.url(report.router)
    async with HttpClient() as http:
        api = router_workers(router_kind(op.spec), report.router_url, http)
        if not api.can_add:  # it could take a worker out and never put it back: touch nothing
            raise RouterApiError(
                f"a rolling restart needs to add workers back to {report.router}, and the "
                f"{op.spec.engine} router's worker API cannot ({router_kind(op.spec)}): use "
                "`servelab restart`"
            )
        # before anything is taken out: a router that lists no model stops here, naming the URL
        model = await listed_model(http, report.router_url, 5.0)
        roll = _Roll(op, api, http, opts, model)
        for target in report.plan:
            worker = WorkerRoll(target)
            report.workers.append(worker)
            if not await _roll_one(roll, worker, report.router_url):
                return


async def rolling_restart(
    target: SpecOrOperation,
    selectors: list[str],
    *,
    options: RollOptions | None = None,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
) -> RollingReport:
    """Restart the workers ``selectors`` name (roles or services) one at a time (module doc)."""
    async with operation(target, ledger=ledger, progress=progress) as op:
        plan = rolling_plan(op.spec, selectors)
        router = op.spec.router_name
        assert router is not None  # rolling_plan refuses a deployment without one
        await check_before_start(op, [t.service for t in plan], restarting=True)
        await check_writable(op, [t.service for t in plan], rollback=False)  # before any remove
        report = RollingReport(plan, router)
        op.say(RollingPlanned(tuple(t.service for t in plan)))
        try:
            await _run(op, report, options or RollOptions())
        except BaseException as exc:
            report.interrupted = isinstance(exc, asyncio.CancelledError)
            report.error = "interrupted" if report.interrupted else (str(exc) or type(exc).__name__)
            _finish(op, report)
            if report.interrupted:
                raise DeployInterrupted(report) from exc
            raise
        _finish(op, report)
    return report


def _finish(op: Operation, report: RollingReport) -> None:
    _note_out(op, report)
    if op.ledger is not None:
        report.deployment_id = op.ledger.add(
            DeploymentRecord(
                id=0,
                at=NOW,
                name=op.spec.name,
                spec_hash=spec_hash(op.spec),
                action="restart --rolling",
                detail=encode(report),
            )
        )
