"""Layered verification of a deployment: config, live, health, e2e.

- **config**: each declared knob's value in the service's env file, against the spec's pinned value
  (when pinned) and against the file's latest backup (the diff is shown, not judged); an argument
  knob's value in the place that wins (``args_env``, the spec's command line, ``--config``) and
  the values it overrides; a systemd unit changed on disk and not reloaded
  (:mod:`servelab.ops.verify.arguments`).
- **live**: the process serving the service (pid record, systemd MainPID, or port owner), its
  ``/proc/PID/environ`` narrowed to the declared knobs, compared with the env file: "in file but not
  live: restart needed", "live but not in file: lost on next restart", "differs"; an argument knob
  from its ``/proc/PID/cmdline`` and from the engine's own ``/server_info``, the layer that
  disagrees named.
- **health**: each service's readiness endpoint (the router's ``/readiness``: its ``/health`` is
  always 200); for the router also its own worker list (``GET /workers``) against the spec's
  workers, per worker: listed, healthy; a worker it does not list fails the router's check.
  A PD worker's own health check never exercises the KV transfer: only e2e does.
- **e2e** (:mod:`servelab.ops.verify.e2e`): a streaming chat completion through the entry point
  (proxy,
  else router), with a prompt long enough to need a real KV transfer: status, TTFT, total time,
  tokens, cold or warm; on an xPyD deployment (two or more workers of a role), then one check per
  prefill and decode worker: a request sent through the router reached it.

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
from dataclasses import dataclass, field, replace

from servelab.core.deploy.engines import readiness_workers
from servelab.core.deploy.rolling import router_kind
from servelab.core.deploy.spec import DeploymentSpec, spec_hash
from servelab.core.knobs.envfile import EnvFile
from servelab.core.knobs.rules import live_verdict, parse_env_bytes, tracked_names
from servelab.core.ledger.codec import JsonObject
from servelab.core.ledger.evidence import KnobChangeRecord
from servelab.core.verify.checks import (
    Check,
    CheckCode,
    CheckFailure,
    EnvFileFailure,
    EnvFileNoKnobs,
    HealthProbe,
    KnobInFile,
    KnobLive,
    KnobLiveVsSpec,
    Layer,
    LayerSkipped,
    LiveProcess,
    NoEnvFile,
    SkipReason,
    WorkerListing,
)
from servelab.errors import KnobError, ServelabError
from servelab.io.hosts.discovery import find_process, read_live
from servelab.io.hosts.envfiles import previous_version, read_env_bytes
from servelab.io.http.client import HttpClient, probe
from servelab.io.ledger.ledger import Ledger
from servelab.io.routerworkers import router_workers
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.progress import ProbingE2E, ProbingHealth, ReadingEnvFile, ReadingLiveEnv
from servelab.ops.verify.arguments import argument_knobs, argument_layers
from servelab.ops.verify.e2e import E2EOptions, e2e_check, reach_checks

__all__ = ["LAYERS", "Check", "E2EOptions", "VerifyReport", "e2e_check", "verify"]

#: The layers' names, in order (what ``verify --layer`` takes).
LAYERS: tuple[str, ...] = tuple(layer.value for layer in Layer)
_C = CheckCode


@dataclass
class VerifyReport:
    """All checks of one verification; ``ok`` only if every check passed."""

    checks: list[Check]
    spec_hash: str
    layers: tuple[Layer, ...]
    services: list[str]
    elapsed_s: float
    verification_id: int | None = None

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def layer(self, name: str) -> list[Check]:
        """The checks of the layer ``name`` (a :class:`Layer`)."""
        return [check for check in self.checks if check.layer == name]

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]

    def to_json(self) -> JsonObject:
        return {
            "ok": self.ok,
            "checks": [check.to_json() for check in self.checks],
            "verification_id": self.verification_id,
            "spec_hash": self.spec_hash,
            "layers": [layer.value for layer in self.layers],
            "services": self.services,
            "elapsed_s": round(self.elapsed_s, 4),
        }


@dataclass(frozen=True)
class _FileState:
    """A service's env file and latest backup, read once for both the config and live layers."""

    path: str | None
    env: EnvFile | None = None
    backup: EnvFile | None = None
    backup_path: str | None = None
    problem: CheckCode | None = None  # the config code when the file could not be read or parsed
    error: str | None = None
    recorded: dict[str, KnobChangeRecord] = field(default_factory=dict)
    #: The service declares argument knobs (checked apart): an env file without env knobs is fine.
    arguments: bool = False


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
    """
    chosen = _layers(layers)
    names = _selected(target.spec, services)
    started = time.perf_counter()
    async with operation(target, ledger=ledger, progress=progress) as op:
        last = _last_recorded(op.ledger)
        jobs: list[Awaitable[list[Check]]] = []
        routed = asyncio.Event()  # set once the e2e probe is done: a router has routed it
        if Layer.E2E not in chosen:
            routed.set()
        if Layer.CONFIG in chosen or Layer.LIVE in chosen:
            jobs += [_knob_layers(op, name, chosen, last.get(name, {}), routed) for name in names]
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


def _error(exc: ServelabError) -> str:
    return f"{type(exc).__name__}: {exc}"


def _failed(layer: Layer, service: str, exc: ServelabError) -> list[Check]:
    return [Check(service, False, _C.error_of(layer), CheckFailure(_error(exc)))]


# -- config and live ---------------------------------------------------------------------------


def _last_recorded(ledger: Ledger | None) -> dict[str, dict[str, KnobChangeRecord]]:
    """service -> knob -> the ledger's last recorded change of it (the last known snapshot)."""
    last: dict[str, dict[str, KnobChangeRecord]] = {}
    for row in ledger.list_knob_changes() if ledger is not None else []:
        last.setdefault(row.service, {})[row.name] = row
    return last


async def _knob_layers(
    op: Operation,
    service: str,
    layers: tuple[Layer, ...],
    recorded: dict[str, KnobChangeRecord],
    routed: asyncio.Event,
) -> list[Check]:
    op.say(ReadingEnvFile(service))
    arguments = argument_knobs(op, service)
    try:
        state = replace(
            await _file_state(op, service), recorded=recorded, arguments=bool(arguments)
        )
    except ServelabError as exc:
        state = _FileState(op.env_path(service), problem=_C.CONFIG_ERROR, error=_error(exc))
    checks = _config_checks(op.spec, service, state) if Layer.CONFIG in layers else []
    if Layer.LIVE in layers:
        op.say(ReadingLiveEnv(service))
        try:
            checks += await _live_checks(op, service, state)
        except ServelabError as exc:
            checks += _failed(Layer.LIVE, service, exc)
    if arguments:
        try:
            checks += await argument_layers(op, service, layers, arguments, routed)
        except ServelabError as exc:
            failed_layers = [layer for layer in (Layer.CONFIG, Layer.LIVE) if layer in layers]
            checks += [check for layer in failed_layers for check in _failed(layer, service, exc)]
    return checks


async def _file_state(op: Operation, service: str) -> _FileState:
    """The env file as it is on disk now (always read: this is what the config layer proves)."""
    path = op.env_path(service)
    if path is None:
        return _FileState(path=None)
    host = op.host(service)
    raw = await read_env_bytes(host, path)
    if raw is None:
        return _FileState(path=path, problem=_C.CONFIG_MISSING)
    try:
        env = parse_env_bytes(raw, path)
    except KnobError as exc:
        return _FileState(path=path, problem=_C.CONFIG_UNREADABLE, error=str(exc))
    previous = await previous_version(host, path, raw, op.backup_dir(service))
    if previous is None:
        return _FileState(path, env)
    return _FileState(path, env, previous[1], previous[0])


def _config_checks(spec: DeploymentSpec, service: str, state: _FileState) -> list[Check]:
    svc = spec.service(service)
    if state.path is None:
        return [Check(service, True, _C.CONFIG_NO_ENV_FILE, NoEnvFile(bool(svc.knobs)))]
    if state.env is None:
        failure = EnvFileFailure(state.path, state.error)
        return [Check(service, False, state.problem or _C.CONFIG_UNREADABLE, failure)]
    names = tracked_names(svc, state.env.as_dict())
    if not names:
        none = Check(service, True, _C.CONFIG_NO_KNOBS, EnvFileNoKnobs(state.path))
        return [] if state.arguments else [none]
    return [_config_check(service, name, svc.knobs.get(name), state) for name in names]


def _config_check(service: str, name: str, pin: str | None, state: _FileState) -> Check:
    assert state.env is not None and state.path is not None
    value = state.env.get(name)
    backup = state.backup.get(name) if state.backup is not None else None
    if pin is None:
        ok, code = True, _C.CONFIG_NOT_PINNED
    else:
        ok = value == pin
        code = _C.CONFIG_MATCHES_SPEC if ok else _C.CONFIG_PIN_MISMATCH
    row = state.recorded.get(name)
    data = KnobInFile(
        name, value, pin, backup, state.backup_path, state.path,
        recorded=None if row is None else row.new,
        recorded_change_id=None if row is None else row.id,
    )  # fmt: skip
    return Check(service, ok, code, data)


async def _live_checks(op: Operation, service: str, state: _FileState) -> list[Check]:
    svc = op.spec.service(service)
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    if proc.pid is None:
        return [Check(service, False, _C.LIVE_NO_PROCESS, LiveProcess(None, proc.source))]
    pid, where = proc.pid, LiveProcess(proc.pid, proc.source)
    file_values = state.env.as_dict() if state.env is not None else {}
    names = tracked_names(svc, file_values)
    if not names:
        return [] if state.arguments else [Check(service, True, _C.LIVE_NO_KNOBS, where)]
    if state.path is not None and state.env is None:
        return [Check(service, False, _C.LIVE_FILE_UNREADABLE, where)]
    live = await read_live(host, pid, names)
    if state.path is None:  # no env file (e.g. a unit's Environment=): live against the spec
        return [_live_vs_spec(service, name, svc.knobs.get(name), live.get(name), where)
                for name in names]  # fmt: skip
    checks = []
    for name in names:
        file, value = file_values.get(name), live.get(name)
        verdict = live_verdict(file, value)
        data = KnobLive(pid, proc.source, name, file, value, verdict)
        checks.append(Check(service, verdict.ok, _C.of_verdict(verdict), data))
    return checks


def _live_vs_spec(
    service: str, name: str, pin: str | None, value: str | None, where: LiveProcess
) -> Check:
    assert where.pid is not None
    ok = pin is None or value == pin
    data = KnobLiveVsSpec(where.pid, where.pid_source, name, value, pin)
    return Check(service, ok, _C.LIVE_NO_ENV_FILE, data)


# -- health ------------------------------------------------------------------------------------


async def _health(op: Operation, service: str) -> list[Check]:
    svc = op.spec.service(service)
    path = svc.readiness_path
    op.say(ProbingHealth(service, path))
    try:
        base = await op.url(service)
    except ServelabError as exc:
        return _failed(Layer.HEALTH, service, exc)
    result = await probe(base + path, timeout=5.0)
    answer = HealthProbe(path, result.status, round(result.elapsed_s, 4))
    if result.status is None:
        unreachable = replace(answer, error=result.error)
        return [Check(service, False, _C.HEALTH_UNREACHABLE, unreachable)]
    if not 200 <= result.status < 300:
        body = " ".join(result.body.split())[:160]
        return [Check(service, False, _C.HEALTH_HTTP_ERROR, replace(answer, body=body))]
    if svc.role == "router":
        answer = await _router_view(op, base, _with_counts(answer, result.body))
        if answer.missing:
            return [Check(service, False, _C.HEALTH_WORKERS_MISSING, answer)]
    worker = svc.role in ("prefill", "decode")
    code = _C.HEALTH_WORKER_READY if worker else _C.HEALTH_READY
    return [Check(service, True, code, answer)]


async def _router_view(op: Operation, base: str, answer: HealthProbe) -> HealthProbe:
    """The router's own worker list against the spec's workers: ``workers`` (service, url,
    role, listed, healthy) and ``missing`` (the spec's workers it does not list); only
    ``workers_error`` when its worker API cannot be read (another router, or none)."""
    async with HttpClient() as http:
        try:
            listed = await router_workers(router_kind(op.spec), base, http).list()
        except ServelabError as exc:
            return replace(answer, workers_error=_error(exc))
    by_url = {worker.url: worker for worker in listed}
    rows = []
    for name in [*op.spec.by_role("prefill"), *op.spec.by_role("decode")]:
        svc = op.spec.service(name)
        seen = by_url.get(svc.url)
        healthy = seen is not None and seen.healthy
        rows.append(WorkerListing(name, svc.url, svc.role, seen is not None, healthy))
    missing = tuple(row.service for row in rows if not row.listed)
    return replace(answer, workers=tuple(rows), missing=missing)


def _with_counts(answer: HealthProbe, body: str) -> HealthProbe:
    """The router's worker counts from its readiness document (sglang-router's or vllm-router's
    shape), when it has them."""
    try:
        doc = json.loads(body)
    except ValueError:
        return answer
    counts = {key: value if isinstance(value, int) else None
              for key, value in readiness_workers(doc).items()}  # fmt: skip
    healthy, total = counts.get("healthy_workers"), counts.get("total_workers")
    return replace(answer, healthy_workers=healthy, total_workers=total)


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
        return _failed(Layer.E2E, entry, exc)
    first = await e2e_check(entry, base, decodes, opts)
    if not first.ok:
        return [first]
    try:
        return [first, *await reach_checks(op, opts)]
    except ServelabError as exc:
        return [first, *_failed(Layer.E2E, op.spec.router_name or entry, exc)]
