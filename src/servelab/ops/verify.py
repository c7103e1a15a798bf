"""Layered verification of a deployment: config, live, health, e2e.

- **config**: each declared knob's value in the service's env file, against the spec's pinned value
  (when pinned) and against the file's latest backup (the diff is shown, not judged).
- **live**: the process serving the service (pid record, systemd MainPID, or port owner), its
  ``/proc/PID/environ`` narrowed to the declared knobs, compared with the env file: "in file but not
  live: restart needed", "live but not in file: lost on next restart", "differs".
- **health**: each service's readiness endpoint (the router's ``/readiness``: its ``/health`` is
  always 200). A PD worker's own health check never exercises the KV transfer: only e2e does.
- **e2e**: a streaming chat completion through the entry point (proxy, else router), with a prompt
  long enough to need a real KV transfer: status, TTFT, total time, tokens, cold or warm.

Every check carries a reason. Only declared (and allow-listed) variables are ever read into a check.
The report is recorded in the ledger when one is given.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from time import perf_counter_ns
from typing import Any

from servelab.core.envfile import EnvFile
from servelab.core.evidence import CheckRecord, KnobChangeRecord
from servelab.core.knobs import (
    LIVE_DIFFERS,
    LIVE_LOST_ON_RESTART,
    LIVE_MATCH,
    LIVE_RESTART_NEEDED,
    LIVE_UNSET,
    live_verdict,
    parse_env_bytes,
    tracked_names,
)
from servelab.core.records import RequestRecord
from servelab.core.spec import DeploymentSpec, spec_hash
from servelab.errors import KnobError, ServelabError
from servelab.io.discovery import find_process, read_live
from servelab.io.envfiles import previous_version, read_env_bytes
from servelab.io.http import HttpClient, StreamClient, chat_body, probe
from servelab.io.ledger import Ledger
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation

__all__ = ["LAYERS", "Check", "E2EOptions", "VerifyReport", "e2e_check", "verify"]

LAYERS: tuple[str, ...] = ("config", "live", "health", "e2e")

_WORKER_NOTE = "a PD worker's own health check never exercises the KV transfer (see e2e)"


@dataclass(frozen=True)
class Check:
    """One verified fact: its layer, the service, pass/fail, a reason, and structured data."""

    layer: str
    service: str
    ok: bool
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def record(self) -> CheckRecord:
        """The check as the ledger records it."""
        return CheckRecord(self.layer, self.service, self.ok, self.detail, self.data)

    def to_json(self) -> dict[str, Any]:
        """``{"layer", "service", "ok", "detail", **data}`` (the ledger's check shape)."""
        return {**self.data, "layer": self.layer, "service": self.service, "ok": self.ok,
                "detail": self.detail}  # fmt: skip


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


def _failed(layer: str, service: str, exc: ServelabError) -> list[Check]:
    return [Check(layer, service, False, f"{type(exc).__name__}: {exc}", {})]


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
        state = _FileState(path=op.env_path(service), error=f"{type(exc).__name__}: {exc}")
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
        return _FileState(path=path, error=f"env file {path} does not exist")
    try:
        env = parse_env_bytes(raw, path)
    except KnobError as exc:
        return _FileState(path=path, error=str(exc))
    previous = await previous_version(host, path, raw, op.backup_dir(service))
    if previous is None:
        return _FileState(path, env)
    return _FileState(path, env, previous[1], previous[0])


def _config_checks(spec: DeploymentSpec, service: str, state: _FileState) -> list[Check]:
    svc = spec.service(service)
    if state.path is None:
        detail = "no env_file in the spec" + (
            "; declared knobs are compared live against the spec only" if svc.knobs else ""
        )
        return [Check("config", service, True, detail, {})]
    if state.error is not None or state.env is None:
        detail = state.error or "unreadable"
        return [Check("config", service, False, detail, {"env_file": state.path})]
    env = state.env
    names = tracked_names(svc, env.as_dict())
    if not names:
        return [Check("config", service, True, "env file parses; no declared knobs",
                      {"env_file": state.path})]  # fmt: skip
    return [_config_check(service, name, svc.knobs.get(name), state) for name in names]


def _config_check(service: str, name: str, pin: str | None, state: _FileState) -> Check:
    assert state.env is not None
    value = state.env.get(name)
    backup = state.backup.get(name) if state.backup is not None else None
    ok = pin is None or value == pin
    if not ok:
        detail = f"file {_show(value)}, spec pins {pin}"
    else:
        detail = f"file {value}" if value is not None else "not set in file (engine default)"
        detail += "; matches spec" if pin is not None else ""
    if state.backup is not None and backup != value:
        detail += f"; changed since backup: {_show(backup)} -> {_show(value)}"
    elif state.backup is not None:
        detail += "; same as backup"
    data: dict[str, Any] = {"knob": name, "file": value, "spec": pin, "backup": backup,
            "backup_path": state.backup_path, "env_file": state.path}  # fmt: skip
    row = state.recorded.get(name)
    if row is not None:
        data.update(recorded=row.new, recorded_change_id=row.id)
        if row.new != value:
            detail += (
                f"; the last recorded change (#{row.id}) set {_show(row.new)}: "
                "edited outside servelab?"
            )
    return Check("config", service, ok, detail, data)


def _show(value: str | None) -> str:
    return "(unset)" if value is None else value


_LIVE_OK = {LIVE_MATCH, LIVE_UNSET}


def _live_detail(verdict: str, file: str | None, live: str | None) -> str:
    if verdict == LIVE_MATCH:
        return f"live {live} = file"
    if verdict == LIVE_UNSET:
        return "not set in file or live (engine default)"
    if verdict == LIVE_RESTART_NEEDED:
        return f"in file but not live: restart needed (file {file})"
    if verdict == LIVE_LOST_ON_RESTART:
        return f"live but not in file: lost on next restart (live {live})"
    assert verdict == LIVE_DIFFERS
    return f"differs: file {file}, live {live} (restart needed)"


async def _live_checks(op: Operation, service: str, state: _FileState) -> list[Check]:
    svc = op.spec.service(service)
    host = op.host(service)
    proc = await find_process(op.loaded, service, host)
    where = {"pid": proc.pid, "pid_source": proc.source}
    if proc.pid is None:
        return [Check("live", service, False, f"no running process found ({proc.source})", where)]
    file_values = state.env.as_dict() if state.env is not None else {}
    names = tracked_names(svc, file_values)
    if not names:
        return [Check("live", service, True, f"pid {proc.pid} ({proc.source}); no declared knobs",
                      where)]  # fmt: skip
    if state.path is not None and state.env is None:
        return [Check("live", service, False, f"pid {proc.pid}: env file unreadable", where)]
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
            Check("live", service, verdict in _LIVE_OK, _live_detail(verdict, file, value), data)
        )
    return checks


def _live_vs_spec(
    service: str, name: str, pin: str | None, value: str | None, where: dict[str, Any]
) -> Check:
    ok = pin is None or value == pin
    detail = f"live {_show(value)}" + (f", spec pins {pin}" if pin is not None else "")
    data = {**where, "knob": name, "file": None, "live": value, "spec": pin}
    return Check("live", service, ok, detail + "; no env file to compare", data)


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
    ok = result.status is not None and 200 <= result.status < 300
    if result.status is None:
        return [Check("health", service, False, f"{path}: unreachable: {result.error}", data)]
    if not ok:
        snippet = " ".join(result.body.split())[:160]
        return [Check("health", service, False, f"{path}: HTTP {result.status}: {snippet}", data)]
    detail = f"{path} {result.status} in {result.elapsed_s * 1000:.0f} ms"
    if svc.role == "router":
        workers = _workers(result.body)
        data.update(workers)
        if workers:
            detail += f" ({workers['healthy_workers']}/{workers['total_workers']} workers healthy)"
    elif svc.role in ("prefill", "decode"):
        detail += f"; {_WORKER_NOTE}"
    return [Check("health", service, True, detail, data)]


def _workers(body: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(doc, dict) or "healthy_workers" not in doc:
        return {}
    return {key: doc.get(key) for key in ("healthy_workers", "total_workers")}


# -- e2e ---------------------------------------------------------------------------------------


async def _e2e(op: Operation, opts: E2EOptions) -> list[Check]:
    entry = op.spec.entry_point
    op.say(f"e2e probe through {entry}")
    try:
        base = await op.url(entry)
        decodes = [await op.url(name) for name in op.spec.by_role("decode")]
    except ServelabError as exc:
        return _failed("e2e", entry, exc)
    ok, detail, data = await e2e_check(base, decodes, opts)
    return [Check("e2e", entry, ok, detail, data)]


@dataclass(frozen=True)
class E2EOptions:
    """The e2e probe: prompt size (words ~ tokens), output tokens, timeouts, cold heuristics.

    Without the simulator's request counter, a first probe is "cold" when it took more than
    ``cold_ratio`` times the immediate second probe and at least ``cold_min_s`` longer.
    """

    prompt_tokens: int = 512
    max_tokens: int = 16
    timeout_s: float = 120.0
    cold_ratio: float = 3.0
    cold_min_s: float = 0.5


def _prompt(words: int, salt: str) -> str:
    vocab = ("prefill", "decode", "router", "cache", "page", "token", "transfer", "bootstrap")
    body = " ".join(vocab[i % len(vocab)] for i in range(max(words - 12, 1)))
    return f"servelab verify probe {salt}: repeat the last word of this text. {body}"


async def _stream_once(base: str, model: str, prompt: str, opts: E2EOptions) -> RequestRecord:
    record = RequestRecord(index=0, scheduled_ns=perf_counter_ns())
    body = chat_body(model, prompt, opts.max_tokens)
    deadline = perf_counter_ns() + int(opts.timeout_s * 1e9)
    async with StreamClient(base, concurrency=1, idle_timeout_s=opts.timeout_s) as client:
        return await client.stream("/v1/chat/completions", body, record, deadline_ns=deadline)


def _timing(record: RequestRecord) -> dict[str, Any]:
    end = record.end_ns or record.sent_ns
    first = next((t for t, n in zip(record.event_ns, record.event_tokens, strict=True) if n), None)
    return {
        "status": record.status,
        "ttft_s": None if first is None else round((first - record.sent_ns) / 1e9, 4),
        "total_s": round((end - record.sent_ns) / 1e9, 4),
        "completion_tokens": record.output_tokens,
        "prompt_tokens": record.input_tokens,
        "error": record.error,
    }


def _record_failure(record: RequestRecord) -> str | None:
    if record.error is not None:
        snippet = " ".join(record.error_detail.split())[:200]
        reason = record.error.replace("http ", "HTTP ", 1)
        return reason + (f": {snippet}" if snippet else "")
    if record.output_tokens <= 0:
        return "no content tokens in the stream"
    return None


def _served(info: Any) -> int | None:
    """Requests a sim decode served so far; 0 while it has not warmed up; None: unknown."""
    sim = info.get("servelab") if isinstance(info, dict) else None
    if not isinstance(sim, dict):
        return None
    if sim.get("warmed_up") is False:
        return 0
    for key in ("requests_total", "requests_served"):
        if isinstance(sim.get(key), int):
            return int(sim[key])
    return None


async def _requests_served(http: HttpClient, decode_urls: list[str]) -> list[int] | None:
    """Each sim decode's requests served so far (None: not a servelab sim, or unknown)."""
    counts = []
    for url in decode_urls:
        count = _served(await http.get_json(url + "/server_info"))
        if count is None:
            return None
        counts.append(count)
    return counts or None


def _classify(
    before: list[int] | None, first: dict[str, Any], second: dict[str, Any] | None, opts: E2EOptions
) -> tuple[str, str]:
    """(``"cold"|"warm"|"unknown"``, why): the sim's counter first, else the second probe."""
    if before is not None:
        if all(count == 0 for count in before):
            return "cold", "first request since the decode started"
        return "warm", f"decode served {sum(before)} request(s) before"
    if second is None:
        return "unknown", "no second probe to compare with"
    t1, t2 = first["total_s"], second["total_s"]
    if t1 > opts.cold_ratio * t2 and t1 - t2 >= opts.cold_min_s:
        return "cold", f"{t1 / max(t2, 1e-6):.1f}x slower than an immediate second probe"
    return "warm", f"an immediate second probe took {t2:.2f} s"


async def e2e_check(
    base: str, decode_urls: list[str], opts: E2EOptions
) -> tuple[bool, str, dict[str, Any]]:
    """One streaming chat completion through ``base`` (+ a second when cold or not a sim).

    Returns (ok, detail, data); a failed request's detail names the status and the reason.
    """
    async with HttpClient() as http:
        model = await http.model_id(base, 5.0) or "default"
        before = await _requests_served(http, decode_urls)
    first_rec = await _stream_once(base, model, _prompt(opts.prompt_tokens, "a"), opts)
    first = _timing(first_rec)
    data: dict[str, Any] = {"model": model, **first, "decode_requests_before": before}
    failure = _record_failure(first_rec)
    if failure is not None:
        return False, f"chat completion failed: {failure}", data
    second = None
    if before is None or all(count == 0 for count in before):
        second_rec = await _stream_once(base, model, _prompt(opts.prompt_tokens, "b"), opts)
        second = data["second"] = _timing(second_rec)
        failure = _record_failure(second_rec)
        if failure is not None:
            return False, f"first request ok, the second failed: {failure}", data
    start, why = _classify(before, first, second, opts)
    data["start"] = start
    detail = (
        f"{first['status']} in {first['total_s']:.2f} s, TTFT {first['ttft_s']:.2f} s, "
        f"{first['completion_tokens']} tokens; {start} ({why})"
    )
    if second is not None:
        detail += f"; second probe {second['total_s']:.2f} s"
    return True, detail, data
