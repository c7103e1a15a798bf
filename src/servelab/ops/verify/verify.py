"""Layered verification of a deployment: config, live, health, e2e.

- **config**: each declared knob's value in the service's env file, against the spec's pinned value
  (when pinned) and against the file's latest backup (the diff is shown, not judged).
- **live**: the process serving the service (pid record, systemd MainPID, or port owner), its
  ``/proc/PID/environ`` narrowed to the declared knobs, compared with the env file: "in file but not
  live: restart needed", "live but not in file: lost on next restart", "differs".
- **health**: each service's readiness endpoint (the router's ``/readiness``: its ``/health`` is
  always 200); for the router also its own worker list (``GET /workers``) against the spec's
  workers, per worker: listed, healthy; a worker it does not list fails the router's check.
  A PD worker's own health check never exercises the KV transfer: only e2e does.
- **e2e** (:mod:`servelab.ops.verify.e2e`): a streaming chat completion through the entry point
  (proxy,
  else router), with a prompt long enough to need a real KV transfer: status, TTFT, total time,
  tokens, cold or warm; on an xPyD deployment (two or more workers of a role), then one check per
  prefill and decode worker: a request sent through the router reached it.

Every check carries an outcome code (:mod:`servelab.core.verify.checks`) and the data its reason is
made of; :func:`servelab.report.verify.check_detail` words it. Only declared (and allow-listed)
variables are ever read into a check. The report is recorded in the ledger when one is given.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.deploy.engines import readiness_workers
from servelab.core.deploy.rolling import router_kind
from servelab.core.deploy.spec import DeploymentSpec, spec_hash
from servelab.core.knobs.envfile import EnvFile
from servelab.core.knobs.rules import (
    LIVE_MATCH,
    LIVE_UNSET,
    live_verdict,
    parse_env_bytes,
    tracked_names,
)
from servelab.core.ledger.evidence import CheckRecord, KnobChangeRecord
from servelab.core.verify.checks import (
    CHECK_CONFIG_ERROR,
    CHECK_CONFIG_MATCHES_SPEC,
    CHECK_CONFIG_MISSING,
    CHECK_CONFIG_NO_ENV_FILE,
    CHECK_CONFIG_NO_KNOBS,
    CHECK_CONFIG_NOT_PINNED,
    CHECK_CONFIG_PIN_MISMATCH,
    CHECK_CONFIG_UNREADABLE,
    CHECK_E2E_ERROR,
    CHECK_HEALTH_ERROR,
    CHECK_HEALTH_HTTP_ERROR,
    CHECK_HEALTH_READY,
    CHECK_HEALTH_UNREACHABLE,
    CHECK_HEALTH_WORKER_READY,
    CHECK_HEALTH_WORKERS_MISSING,
    CHECK_LIVE_ERROR,
    CHECK_LIVE_FILE_UNREADABLE,
    CHECK_LIVE_NO_ENV_FILE,
    CHECK_LIVE_NO_KNOBS,
    CHECK_LIVE_NO_PROCESS,
    LIVE_VERDICT_CODES,
)
from servelab.errors import KnobError, ServelabError
from servelab.io.hosts.discovery import find_process, read_live
from servelab.io.hosts.envfiles import previous_version, read_env_bytes
from servelab.io.http.client import HttpClient, probe
from servelab.io.ledger.ledger import Ledger
from servelab.io.routerworkers import router_workers
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.verify.e2e import E2EOptions, e2e_check, reach_outcomes

__all__ = ["LAYERS", "Check", "E2EOptions", "VerifyReport", "e2e_check", "verify"]

LAYERS: tuple[str, ...] = ("config", "live", "health", "e2e")

_ERRORS = {"config": CHECK_CONFIG_ERROR, "live": CHECK_LIVE_ERROR, "health": CHECK_HEALTH_ERROR,
           "e2e": CHECK_E2E_ERROR}  # fmt: skip


@dataclass(frozen=True)
class Check:
    """One verified fact: its layer, the service, pass/fail, its outcome ``code``
    (:mod:`servelab.core.verify.checks`) and the structured data its reason is rendered from."""

    layer: str
    service: str
    ok: bool
    code: str
    data: dict[str, Any] = field(default_factory=dict)

    def record(self) -> CheckRecord:
        """The check as the ledger records it."""
        return CheckRecord(self.layer, self.service, self.ok, None, self.data, self.code)

    def to_json(self) -> dict[str, Any]:
        """``{"layer", "service", "ok", "code", **data}`` (the ledger's check shape, without the
        ``detail`` sentence: :func:`servelab.report.verify.check_json` adds it)."""
        return {**self.data, "layer": self.layer, "service": self.service, "ok": self.ok,
                "code": self.code}  # fmt: skip


@dataclass
class VerifyReport:
    """All checks of one verification; ``ok`` only if every check passed."""

    checks: list[Check]
    spec_hash: str
    layers: tuple[str, ...]
    services: list[str]
    elapsed_s: float
    verification_id: int | None = None

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def layer(self, name: str) -> list[Check]:
        return [check for check in self.checks if check.layer == name]

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [check.to_json() for check in self.checks],
            "verification_id": self.verification_id,
            "spec_hash": self.spec_hash,
            "layers": list(self.layers),
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
    problem: str | None = None  # the config code when the file could not be read or parsed
    error: str | None = None
    recorded: dict[str, KnobChangeRecord] = field(default_factory=dict)


async def verify(
    target: SpecOrOperation,
    services: list[str] | None = None,
    *,
    layers: tuple[str, ...] = LAYERS,
    ledger: Ledger | None = None,
    progress: Progress | None = None,
    e2e: E2EOptions | None = None,
) -> VerifyReport:
    """Verify ``services`` (default: all) in ``layers``; record the report in the ledger (given,
    else the operation's, if any).

    Checks run concurrently; the report lists them by layer, then in the spec's service order.
    """
    unknown = [name for name in layers if name not in LAYERS]
    if unknown:
        raise ValueError(f"unknown layer(s) {unknown}; choose from {list(LAYERS)}")
    names = _selected(target.spec, services)
    started = time.perf_counter()
    async with operation(target, ledger=ledger, progress=progress) as op:
        last = _last_recorded(op.ledger)
        jobs: list[Awaitable[list[Check]]] = []
        if "config" in layers or "live" in layers:
            jobs += [_knob_layers(op, name, layers, last.get(name, {})) for name in names]
        if "health" in layers:
            jobs += [_health(op, name) for name in names]
        if "e2e" in layers:
            jobs.append(_e2e(op, e2e or E2EOptions()))
        results = await asyncio.gather(*jobs)
        checks = _ordered([check for group in results for check in group], names)
        report = VerifyReport(
            checks, spec_hash(op.spec), tuple(layers), names, time.perf_counter() - started
        )
        if op.ledger is not None:
            report.verification_id = op.ledger.record_verification(
                spec_hash=report.spec_hash, ok=report.ok, checks=[c.record() for c in checks]
            )
    return report


def _selected(spec: DeploymentSpec, services: list[str] | None) -> list[str]:
    if not services:
        return list(spec.services)
    for name in services:
        spec.service(name)  # SpecError naming the known services
    return [name for name in spec.services if name in services]


def _ordered(checks: list[Check], names: list[str]) -> list[Check]:
    rank = {name: i for i, name in enumerate(names)}

    def key(check: Check) -> tuple[int, int]:
        return LAYERS.index(check.layer), rank.get(check.service, len(rank))

    return sorted(checks, key=key)


def _error(exc: ServelabError) -> str:
    return f"{type(exc).__name__}: {exc}"


def _failed(layer: str, service: str, exc: ServelabError) -> list[Check]:
    return [Check(layer, service, False, _ERRORS[layer], {"error": _error(exc)})]


# -- config and live ---------------------------------------------------------------------------


def _last_recorded(ledger: Ledger | None) -> dict[str, dict[str, KnobChangeRecord]]:
    """service -> knob -> the ledger's last recorded change of it (the last known snapshot)."""
    last: dict[str, dict[str, KnobChangeRecord]] = {}
    for row in ledger.list_knob_changes() if ledger is not None else []:
        last.setdefault(row.service, {})[row.name] = row
    return last


async def _knob_layers(
    op: Operation, service: str, layers: tuple[str, ...], recorded: dict[str, KnobChangeRecord]
) -> list[Check]:
    op.say(f"reading the env file of {service}")
    try:
        state = replace(await _file_state(op, service), recorded=recorded)
    except ServelabError as exc:
        state = _FileState(op.env_path(service), problem=CHECK_CONFIG_ERROR, error=_error(exc))
    checks = _config_checks(op.spec, service, state) if "config" in layers else []
    if "live" in layers:
        op.say(f"reading the live environment of {service}")
        try:
            checks += await _live_checks(op, service, state)
        except ServelabError as exc:
            checks += _failed("live", service, exc)
    return checks


async def _file_state(op: Operation, service: str) -> _FileState:
    """The env file as it is on disk now (always read: this is what the config layer proves)."""
    path = op.env_path(service)
    if path is None:
        return _FileState(path=None)
    host = op.host(service)
    raw = await read_env_bytes(host, path)
    if raw is None:
        return _FileState(path=path, problem=CHECK_CONFIG_MISSING)
    try:
        env = parse_env_bytes(raw, path)
    except KnobError as exc:
        return _FileState(path=path, problem=CHECK_CONFIG_UNREADABLE, error=str(exc))
    previous = await previous_version(host, path, raw, op.backup_dir(service))
    if previous is None:
        return _FileState(path, env)
    return _FileState(path, env, previous[1], previous[0])


def _config_checks(spec: DeploymentSpec, service: str, state: _FileState) -> list[Check]:
    svc = spec.service(service)
    if state.path is None:
        return [
            Check("config", service, True, CHECK_CONFIG_NO_ENV_FILE, {"knobs": bool(svc.knobs)})
        ]
    if state.env is None:
        data = {"env_file": state.path, "error": state.error}
        return [Check("config", service, False, state.problem or CHECK_CONFIG_UNREADABLE, data)]
    names = tracked_names(svc, state.env.as_dict())
    if not names:
        return [Check("config", service, True, CHECK_CONFIG_NO_KNOBS, {"env_file": state.path})]
    return [_config_check(service, name, svc.knobs.get(name), state) for name in names]


def _config_check(service: str, name: str, pin: str | None, state: _FileState) -> Check:
    assert state.env is not None
    value = state.env.get(name)
    backup = state.backup.get(name) if state.backup is not None else None
    if pin is None:
        ok, code = True, CHECK_CONFIG_NOT_PINNED
    else:
        ok = value == pin
        code = CHECK_CONFIG_MATCHES_SPEC if ok else CHECK_CONFIG_PIN_MISMATCH
    data: dict[str, Any] = {"knob": name, "file": value, "spec": pin, "backup": backup,
            "backup_path": state.backup_path, "env_file": state.path}  # fmt: skip
    row = state.recorded.get(name)
    if row is not None:
        data.update(recorded=row.new, recorded_change_id=row.id)
    return Check("config", service, ok, code, data)


_LIVE_OK = {LIVE_MATCH, LIVE_UNSET}


async def _live_checks(op: Operation, service: str, state: _FileState) -> list[Check]:
    svc = op.spec.service(service)
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    where = {"pid": proc.pid, "pid_source": proc.source}
    if proc.pid is None:
        return [Check("live", service, False, CHECK_LIVE_NO_PROCESS, where)]
    file_values = state.env.as_dict() if state.env is not None else {}
    names = tracked_names(svc, file_values)
    if not names:
        return [Check("live", service, True, CHECK_LIVE_NO_KNOBS, where)]
    if state.path is not None and state.env is None:
        return [Check("live", service, False, CHECK_LIVE_FILE_UNREADABLE, where)]
    live = await read_live(host, proc.pid, names)
    if state.path is None:  # no env file (e.g. a unit's Environment=): live against the spec
        return [_live_vs_spec(service, name, svc.knobs.get(name), live.get(name), where)
                for name in names]  # fmt: skip
    checks = []
    for name in names:
        file, value = file_values.get(name), live.get(name)
        verdict = live_verdict(file, value)
        data = {**where, "knob": name, "file": file, "live": value, "verdict": verdict}
        checks.append(
            Check("live", service, verdict in _LIVE_OK, LIVE_VERDICT_CODES[verdict], data)
        )
    return checks


def _live_vs_spec(
    service: str, name: str, pin: str | None, value: str | None, where: dict[str, Any]
) -> Check:
    ok = pin is None or value == pin
    data = {**where, "knob": name, "file": None, "live": value, "spec": pin}
    return Check("live", service, ok, CHECK_LIVE_NO_ENV_FILE, data)


# -- health ------------------------------------------------------------------------------------


async def _health(op: Operation, service: str) -> list[Check]:
    svc = op.spec.service(service)
    path = svc.readiness_path
    op.say(f"probing {service} {path}")
    try:
        base = await op.url(service)
    except ServelabError as exc:
        return _failed("health", service, exc)
    result = await probe(base + path, timeout=5.0)
    data: dict[str, Any] = {"path": path, "status": result.status,
                            "elapsed_s": round(result.elapsed_s, 4)}  # fmt: skip
    if result.status is None:
        data["error"] = result.error
        return [Check("health", service, False, CHECK_HEALTH_UNREACHABLE, data)]
    if not 200 <= result.status < 300:
        data["body"] = " ".join(result.body.split())[:160]
        return [Check("health", service, False, CHECK_HEALTH_HTTP_ERROR, data)]
    if svc.role == "router":
        data.update(_workers(result.body))
        data.update(await _router_view(op, base))
        if data.get("missing"):
            return [Check("health", service, False, CHECK_HEALTH_WORKERS_MISSING, data)]
    worker = svc.role in ("prefill", "decode")
    code = CHECK_HEALTH_WORKER_READY if worker else CHECK_HEALTH_READY
    return [Check("health", service, True, code, data)]


async def _router_view(op: Operation, base: str) -> dict[str, Any]:
    """The router's own worker list against the spec's workers: ``workers`` (service, url,
    role, listed, healthy) and ``missing`` (the spec's workers it does not list); only
    ``workers_error`` when its worker API cannot be read (another router, or none)."""
    async with HttpClient() as http:
        try:
            listed = await router_workers(router_kind(op.spec), base, http).list()
        except ServelabError as exc:
            return {"workers_error": _error(exc)}
    by_url = {worker.url: worker for worker in listed}
    rows = []
    for name in [*op.spec.by_role("prefill"), *op.spec.by_role("decode")]:
        url = op.spec.service(name).url
        seen = by_url.get(url)
        healthy = seen is not None and seen.healthy
        role = op.spec.service(name).role
        rows.append(
            {"service": name, "url": url, "role": role, "listed": seen is not None,
             "healthy": healthy}
        )  # fmt: skip
    return {"workers": rows, "missing": [row["service"] for row in rows if not row["listed"]]}


def _workers(body: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    return readiness_workers(doc)  # sglang-router's or vllm-router's shape


# -- e2e ---------------------------------------------------------------------------------------


async def _e2e(op: Operation, opts: E2EOptions) -> list[Check]:
    entry = op.spec.entry_point
    op.say(f"e2e probe through {entry}")
    try:
        base = await op.url(entry)
        decodes = [await op.url(name) for name in op.spec.by_role("decode")]
    except ServelabError as exc:
        return _failed("e2e", entry, exc)
    ok, code, data = await e2e_check(base, decodes, opts)
    checks = [Check("e2e", entry, ok, code, data)]
    if not ok:
        return checks
    try:
        outcomes = await reach_outcomes(op, opts)
    except ServelabError as exc:
        return checks + _failed("e2e", op.spec.router_name or entry, exc)
    return checks + [Check("e2e", o.service, o.ok, o.code, o.data) for o in outcomes]
