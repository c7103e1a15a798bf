"""Layered verification of a deployment: config, live, pair, health, e2e.

- **config**: each declared knob's value in the service's env file, against the spec's pinned value
  (when pinned) and against the file's latest backup (the diff is shown, not judged); an argument
  knob's value in the place that wins (``args_env``, the spec's command line, ``--config``) and
  the values it overrides; a systemd unit changed on disk and not reloaded.
- **live**: the process serving the service (pid record, systemd MainPID, or port owner), its
  ``/proc/PID/environ`` narrowed to the declared knobs, compared with the env file: "in file but not
  live: restart needed", "live but not in file: lost on next restart", "differs"; an argument knob
  from its ``/proc/PID/cmdline`` and from the engine's own ``/server_info``, the layer that
  disagrees named; a declared env knob the engine's release does not read.
- **pair**: each prefill/decode pair the router can form, what the two engines report about the
  KV hand-off (page size, KV cache dtype, model, transfer backend, TP, context length), compared
  by the engine's rules (:mod:`servelab.ops.verify.layers.pair`).
- **health**: each service's readiness endpoint (the router's ``/readiness``: its ``/health`` is
  always 200); for the router also its own worker list (``GET /workers``) against the spec's
  workers, per worker: listed, healthy, its role and bootstrap port; a worker it does not list,
  lists otherwise, or lists without the spec having it fails the router's check.
  A PD worker's own health check never exercises the KV transfer: only e2e does.
- **e2e** (:mod:`servelab.ops.verify.e2e`): a streaming chat completion through the entry point
  (proxy,
  else router), with a prompt long enough to need a real KV transfer: status, TTFT, total time,
  tokens, cold or warm; one long prompt sized from the engines' own input limit (at most 8,192
  tokens: :mod:`servelab.ops.verify.longprompt`); then a few greedy answer probes against the
  deployment's references in the ledger (:mod:`servelab.ops.verify.answers`: a changed answer
  fails, placed at the KV hand-off or later); on an xPyD deployment (two or more workers of a
  role), then one check per prefill and decode worker: a request sent through the router
  reached it.

The config and live layers are read by the knob layers' readers, one module each, registered in
:data:`servelab.ops.verify.layers.registry.READERS` (file, service manager, process, engine);
verify runs each registered reader of a chosen layer, per service or once for the deployment.

Every check (:class:`~servelab.core.verify.checks.Check`) carries an outcome code and its data, one
type per kind of fact; :func:`servelab.report.verify.check_detail` words it. Only declared (and
allow-listed) variables are ever read into a check. The report is recorded in the ledger when one
is given.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Iterable
from dataclasses import replace

from servelab.core.deploy.probe import quoted
from servelab.core.deploy.refusals import AnothersProcesses, VerifyRefused
from servelab.core.deploy.rolling import router_kind
from servelab.core.deploy.spec import DeploymentSpec, spec_hash
from servelab.core.engines import readiness_workers
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.verify.checks import Check, CheckCode, Layer, LayerSkipped, SkipReason
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe
from servelab.core.verify.events import ProbingE2E, ProbingHealth
from servelab.core.verify.health import HealthProbe, StaleWorker
from servelab.core.verify.pair import listening_bootstrap
from servelab.core.verify.routerview import ListedWorker, SpecWorker, router_view
from servelab.errors import ServelabError, WorkerListError
from servelab.io.http.client import HttpClient, probe
from servelab.io.ledger.ledger import Ledger
from servelab.io.routerworkers import removal_command, router_workers
from servelab.ops.arguments import engine_report
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.anothers import anothers_processes
from servelab.ops.verify.answers import answers_check
from servelab.ops.verify.e2e import E2EOptions, e2e_check, reach_checks
from servelab.ops.verify.layers.reader import LayerReader, ReadContext, error_text, failed
from servelab.ops.verify.layers.registry import READERS
from servelab.ops.verify.longprompt import engine_limits

__all__ = ["LAYERS", "router_listing", "verify"]

#: The layers' names, in order (what ``verify --layer`` takes).
LAYERS: tuple[str, ...] = tuple(layer.value for layer in Layer)
_C = CheckCode


async def verify(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    layers: Iterable[str] = LAYERS,
    ledger: Ledger | None = None,
    progress: Progress | None = None,
    e2e: E2EOptions | None = None,
) -> VerifyReport:
    """Verify ``services`` (default: all) in ``layers`` (names of :class:`Layer`); record the
    report in the ledger (given, else the operation's, if any).

    Checks run concurrently; the report lists them by layer, then in the spec's service order.
    :class:`~servelab.core.deploy.refusals.VerifyRefused` (nothing read, nothing recorded) when
    the processes serving the services are another copy's of this deployment (its name, another
    state folder or address: a copy of a running spec runs nothing of its own); a deployment of
    another name (the one an ``init`` spec describes) is verified as it runs.
    """
    chosen = _layers(layers)
    names = _selected(target.spec, services)
    started = time.perf_counter()
    async with operation(target, ledger=ledger, progress=progress) as op:
        if held := await anothers_processes(op, names):
            raise VerifyRefused(AnothersProcesses(held))
        routed = asyncio.Event()  # set once the e2e probe is done: a router has routed it
        if Layer.E2E not in chosen:
            routed.set()
        jobs = _knob_layers(op, names, chosen, routed)
        if Layer.HEALTH in chosen:
            jobs += [_health(op, name) for name in names]
        if Layer.E2E in chosen:
            jobs.append(_e2e_then(op, e2e or E2EOptions(), routed))
        results = await asyncio.gather(*jobs)
        checks = _ordered([check for group in results for check in group], names)
        report = VerifyReport(
            checks, spec_hash(op.spec), chosen, names, time.perf_counter() - started
        )
        if op.ledger is not None:
            report.verification_id = op.ledger.record_verification(
                spec_hash=report.spec_hash, ok=report.ok, checks=checks
            )
    return report


def _layers(names: Iterable[str]) -> tuple[Layer, ...]:
    names = tuple(names)
    unknown = [name for name in names if name not in LAYERS]
    if unknown:
        raise ValueError(f"unknown layer(s) {unknown}; choose from {list(LAYERS)}")
    return tuple(Layer(name) for name in names)


def _selected(spec: DeploymentSpec, services: list[str] | None) -> list[str]:
    if not services:
        return list(spec.services)
    for name in services:
        spec.service(name)  # SpecError naming the known services
    return [name for name in spec.services if name in services]


def _ordered(checks: list[Check], names: list[str]) -> list[Check]:
    rank = {name: i for i, name in enumerate(names)}
    order = list(Layer)

    def key(check: Check) -> tuple[int, int]:
        return order.index(check.layer), rank.get(check.service, len(rank))

    return sorted(checks, key=key)


# -- the knob layers (the registry's readers) ------------------------------------------------


def _last_recorded(ledger: Ledger | None) -> dict[str, dict[str, KnobChangeRecord]]:
    """service -> knob -> the ledger's last recorded change of it (the last known snapshot)."""
    last: dict[str, dict[str, KnobChangeRecord]] = {}
    for row in ledger.list(KnobChangeRecord) if ledger is not None else []:
        last.setdefault(row.service, {})[row.name] = row
    return last


def _knob_layers(
    op: Operation, names: list[str], chosen: tuple[Layer, ...], routed: asyncio.Event
) -> list[Awaitable[list[Check]]]:
    """One job per registered reader of a chosen layer: per service, or once."""
    last = _last_recorded(op.ledger)
    contexts = {
        name: ReadContext(op, name, chosen, names, last.get(name, {}), routed) for name in names
    }
    whole = ReadContext(op, None, chosen, names, routed=routed)
    jobs: list[Awaitable[list[Check]]] = []
    for reader in READERS:
        if reader.layer not in chosen:
            continue
        targets = list(contexts.values()) if reader.per_service else [whole]
        jobs += [_run(reader, ctx) for ctx in targets]
    return jobs


async def _run(reader: LayerReader, ctx: ReadContext) -> list[Check]:
    try:
        return await reader.read(ctx)
    except ServelabError as exc:
        return failed(reader.layer, ctx.service or ctx.op.spec.entry_point, exc)


# -- health ------------------------------------------------------------------------------------


async def _health(op: Operation, service: str) -> list[Check]:
    svc, path = op.spec.service(service), op.spec.readiness_path(service)
    op.say(ProbingHealth(service, path))
    try:
        base = await op.url(service)
    except ServelabError as exc:
        return failed(Layer.HEALTH, service, exc)
    result = await probe(base + path, timeout=5.0)
    answer = HealthProbe(path, result.status, round(result.elapsed_s, 4))
    if result.status is None:
        unreachable = replace(answer, error=result.error)
        return [Check(service, False, _C.HEALTH_UNREACHABLE, unreachable)]
    if not 200 <= result.status < 300:
        body = quoted(result.body)  # secrets masked (the one redaction policy)
        return [Check(service, False, _C.HEALTH_HTTP_ERROR, replace(answer, body=body))]
    if svc.role == "router":
        try:
            answer = await _router_view(op, base, _with_counts(answer, result.body))
        except WorkerListError as exc:  # a worker list of another shape: not a pass
            answer = replace(_with_counts(answer, result.body), workers_error=error_text(exc))
            return [Check(service, False, _C.HEALTH_WORKERS_UNREADABLE, answer)]
        failing = _router_code(answer)
        if failing is not None:
            return [Check(service, False, failing, answer)]
    if svc.role == "prefill" and svc.bootstrap_port is not None:
        listening = await _listening_bootstrap(op, service)
        if listening is not None and listening != svc.bootstrap_port:
            wrong = replace(answer, listening_bootstrap_port=listening,
                            spec_bootstrap_port=svc.bootstrap_port)  # fmt: skip
            return [Check(service, False, _C.HEALTH_BOOTSTRAP_MISMATCH, wrong)]
    worker = svc.role in ("prefill", "decode")
    code = _C.HEALTH_WORKER_READY if worker else _C.HEALTH_READY
    return [Check(service, True, code, answer)]


async def _listening_bootstrap(op: Operation, service: str) -> int | None:
    """The KV bootstrap port a prefill reports it listens on (SGLang's ``/server_info``; None:
    not reported, or no report: vLLM's NIXL side channel is not in its report)."""
    try:
        return listening_bootstrap(await engine_report(op, service))
    except ServelabError:
        return None


async def _router_view(op: Operation, base: str, answer: HealthProbe) -> HealthProbe:
    """The router's own worker list against the spec's workers: ``workers`` (service, url,
    role, listed, healthy) and ``missing`` (the spec's workers it does not list); only
    ``workers_error`` when its worker API cannot be read (another router, or none); raises
    :class:`~servelab.errors.WorkerListError` when it answers a list of another shape."""
    async with HttpClient() as http:
        try:
            listed = await router_workers(router_kind(op.spec), base, http).list()
        except WorkerListError:
            raise
        except ServelabError as exc:
            return replace(answer, workers_error=error_text(exc))
    names = [*op.spec.by_role("prefill"), *op.spec.by_role("decode")]
    spec = [_spec_worker(op, name) for name in names]
    seen = [ListedWorker(w.id, w.url, w.role, w.healthy, w.bootstrap_port) for w in listed]
    rows, others = router_view(spec, seen)
    missing = tuple(row.service for row in rows if not row.listed)
    router_url = op.spec.service(op.spec.router_name or op.spec.entry_point).url
    by_url = {worker.url: worker for worker in listed}
    stale = tuple(
        StaleWorker(w.url, w.role, w.id,
                    tuple(removal_command(router_kind(op.spec), router_url, by_url[w.url])))
        for w in others
    )  # fmt: skip
    return replace(answer, workers=rows, missing=missing, unknown=stale or None)


async def router_listing(
    op: Operation, service: str
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """What the router ``service`` lists of the spec's workers: the ones it does not list
    (empty: it lists them all) and the URLs it lists that are none of the spec's; None when its
    worker list cannot be read (another kind of router, a list of another shape, no answer)."""
    try:
        base = await op.url(service)
        answer = HealthProbe(op.spec.readiness_path(service), None, 0.0)
        view = await _router_view(op, base, answer)
    except ServelabError:
        return None
    if view.workers_error is not None:
        return None
    return view.missing or (), tuple(w.url for w in view.unknown or ())


def _spec_worker(op: Operation, name: str) -> SpecWorker:
    svc = op.spec.service(name)
    return SpecWorker(name, svc.url, svc.role, svc.bootstrap_port)


def _router_code(answer: HealthProbe) -> CheckCode | None:
    """The failing code of a router's view, if any (missing first, then misregistered, then
    unknown)."""
    if answer.missing:
        return _C.HEALTH_WORKERS_MISSING
    if any(row.misregistered for row in answer.workers or ()):
        return _C.HEALTH_WORKERS_MISREGISTERED
    if answer.unknown:
        return _C.HEALTH_WORKERS_UNKNOWN
    return None


def _with_counts(answer: HealthProbe, body: str) -> HealthProbe:
    """The router's worker counts from its readiness document (sglang-router's or vllm-router's
    shape), when it has them."""
    try:
        doc = json.loads(body)
    except ValueError:
        return answer
    counts = readiness_workers(doc)
    if counts is None:
        return replace(answer, healthy_workers=None, total_workers=None)
    return replace(answer, healthy_workers=counts.healthy, total_workers=counts.total)


# -- e2e ---------------------------------------------------------------------------------------


async def _e2e_then(op: Operation, opts: E2EOptions, done: asyncio.Event) -> list[Check]:
    """The e2e layer, then ``done`` set (whatever its outcome)."""
    try:
        return await _e2e(op, opts)
    finally:
        done.set()


async def _e2e(op: Operation, opts: E2EOptions) -> list[Check]:
    if not (op.spec.by_role("proxy") or op.spec.by_role("router")):
        skipped = LayerSkipped(SkipReason.NO_ENTRY_POINT)  # said, neither passed nor failed
        about = (op.spec.by_role("decode") or list(op.spec.services))[0]
        return [Check(about, True, CheckCode.E2E_SKIPPED, skipped)]
    entry = op.spec.entry_point
    op.say(ProbingE2E(entry))
    try:
        base = await op.url(entry)
        decodes = [await op.url(name) for name in op.spec.by_role("decode")]
    except ServelabError as exc:
        return failed(Layer.E2E, entry, exc)
    limits = await engine_limits(op, opts.max_tokens)
    first = await e2e_check(entry, base, decodes, opts, limits)
    if not first.ok and first.code is not CheckCode.E2E_LONG_FAILED:  # short prompts went through
        return [first]
    checks = [first, *await _answers(op, entry, base, first, opts)]
    try:
        return [*checks, *await reach_checks(op, opts)]
    except ServelabError as exc:
        return [*checks, *failed(Layer.E2E, op.spec.router_name or entry, exc)]


async def _answers(op: Operation, entry: str, base: str, first: Check, opts: E2EOptions
                   ) -> list[Check]:  # fmt: skip
    """The answer probes after a passed e2e probe (none when ``opts.answer_probes`` is 0)."""
    if opts.answer_probes <= 0 or not isinstance(first.data, E2EProbe):
        return []
    try:
        return [
            await answers_check(
                op,
                entry,
                base,
                first.data.model,
                count=opts.answer_probes,
                timeout_s=opts.timeout_s,
                rebase=opts.rebase_answers,
            )
        ]
    except ServelabError as exc:
        return failed(Layer.E2E, entry, exc)
