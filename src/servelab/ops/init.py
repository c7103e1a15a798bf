"""``servelab init``: read a running deployment into an :class:`~servelab.core.init.contract.
InitResult`, from which a spec is written (:mod:`servelab.report.init`).

What it reads, in order:

- the router's worker list (``GET /workers``; its shape tells which router answers,
  :func:`~servelab.core.init.detect.router_kind_of`) through that router's worker API
  (:mod:`servelab.io.routerworkers`): each worker's URL, role and bootstrap port;
- the model the router lists (``GET /v1/models``);
- each worker's own report (SGLang: ``/server_info``, else ``/get_server_info``; vLLM:
  ``/server_info?config_format=json``, answered only under ``VLLM_SERVER_DEV_MODE=1``, and
  ``/version``): its model path and engine version;
- on the deployment's host (this machine for loopback URLs, or the SSH host ``--ssh`` names, where
  every URL is as that host sees it), the process listening on each service's port: its systemd
  unit (``/proc/PID/cgroup``) with the unit's ``ExecStart=`` and ``EnvironmentFile=`` and the
  variable of that file the command line expands (where the arguments live); else its own command
  line (``/proc/PID/cmdline``), unless it rewrote it (the routers do); the router's other
  listening port that answers ``/metrics`` (its Prometheus port).

Whatever it cannot read is a :class:`~servelab.core.init.contract.Gap`; nothing is guessed
silently. The process environment is never copied (it may hold secrets).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from servelab.core.deploy.routers import ROUTERS, RouterKind
from servelab.core.deploy.spec import HostSpec
from servelab.core.engines import engine as engine_of
from servelab.core.init.contract import (
    ANSWER_BYTES,
    ANSWERS_BYTES,
    FoundHost,
    FoundService,
    Gap,
    GapCode,
    InitResult,
    StartFact,
)
from servelab.core.init.detect import (
    args_variable,
    environment_files,
    exec_start_argv,
    listening_inodes,
    router_kind_of,
    service_names,
    socket_inodes,
    unit_of_cgroup,
)
from servelab.core.knobs.envfile import parse_envfile
from servelab.core.printable import printable
from servelab.core.redaction import clip_long, redact, redact_url, redact_words
from servelab.core.urls import parse_url
from servelab.errors import (
    HostError,
    KnobError,
    OptionError,
    RouterApiError,
    ServelabError,
    WorkerListError,
)
from servelab.io.hosts.envfiles import MAX_FILE_BYTES
from servelab.io.hosts.host import Host, host_for
from servelab.io.http.client import REDIRECTED, HttpClient, oversize
from servelab.io.routerworkers import RouterWorker, router_workers

__all__ = ["InitOptions", "discover"]

_TIMEOUT_S = 10.0
#: The most workers ``init`` reads from one router (each is asked for its report and process).
MAX_WORKERS = 256
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class InitOptions:
    """What ``init`` is told: the router's URL (as the deployment's host sees it), the SSH host
    the deployment runs on (None: this machine), the spec's name."""

    router_url: str
    host: HostSpec | None = None
    name: str = "servelab"


@dataclass
class _Reading:
    """One ``init``'s connections, the gaps found so far and the bytes of answers read."""

    http: HttpClient
    host: Host | None
    host_name: str
    gaps: list[Gap]
    read: int = 0
    #: The router's URL, as the errors of what it (or a worker it lists) answered name it.
    router: str = ""
    #: The status of the last answer read (None: no HTTP answer).
    status: int | None = None
    #: Where the last answer redirected to, redacted (None: it did not; init follows none).
    redirect: str | None = None

    async def url(self, url: str) -> str:
        return url if self.host is None or self.host.is_local else await self.host.http_url(url)

    def gap(self, service: str | None, code: GapCode, detail: str = "") -> None:
        self.gaps.append(Gap(service, code, detail))

    async def answer(self, base: str, path: str, service: str | None) -> Any:
        """The JSON document at ``base + path``, read to :data:`ANSWER_BYTES` (over them: a gap
        naming ``service``'s answer, None); None when there is none; a
        :class:`~servelab.errors.WorkerListError` (bad input: exit 2) once all answers are over
        :data:`ANSWERS_BYTES`."""
        if self.read > ANSWERS_BYTES:
            raise WorkerListError(
                f"{self.router}: the deployment's answers are over {ANSWERS_BYTES >> 20} MiB "
                "together: init reads no more (a real deployment's are a few MiB)"
            )
        got = await self.http.probe(
            base + path, timeout=_TIMEOUT_S, body_limit=None, whole_limit=ANSWER_BYTES,
            follow_redirects=False,
        )  # fmt: skip
        self.read += len(got.body)
        self.status = got.status
        where = (got.error or "").removeprefix(REDIRECTED).strip()
        redirected = got.error is not None and got.error.startswith(REDIRECTED)
        self.redirect = clip_long(printable(redact(redact_url(where)))) if redirected else None
        if got.error == oversize(ANSWER_BYTES):
            self.read += ANSWER_BYTES  # read before it was given up
            self.gap(service, GapCode.ANSWER_TOO_LARGE, path)
            return None
        try:
            return json.loads(got.body) if got.status == 200 else None
        except (ValueError, RecursionError):  # not JSON, or nested deeper than a parser goes
            return None

    async def model(self, base: str, service: str | None) -> str | None:
        """The first model ``GET /v1/models`` at ``base`` lists (None: none)."""
        doc = await self.answer(base, "/v1/models", service)
        try:
            return str(doc["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            return None


async def discover(options: InitOptions) -> InitResult:
    """Read the deployment behind ``options.router_url``; raises
    :class:`~servelab.errors.RouterApiError` when its worker list cannot be read (exit 1), and
    :class:`~servelab.errors.WorkerListError` when what the router answered cannot be used
    (exit 2: over a bound, not a worker list, no usable prefill or decode)."""
    host, host_name = _host(options)
    try:
        async with HttpClient() as http:
            router = options.router_url.rstrip("/")
            reading = _Reading(http, host, host_name, [], router=router)
            return await _discover(reading, options)
    finally:
        if host is not None:
            await host.aclose()


def _host(options: InitOptions) -> tuple[Host | None, str]:
    if options.host is not None:
        name = (options.host.ssh or "remote").rpartition("@")[2].split(".")[0] or "remote"
        return host_for(name, options.host), name
    loopback = urlsplit(options.router_url).hostname in _LOOPBACK
    return (host_for("local", HostSpec()), "local") if loopback else (None, "local")


async def _discover(reading: _Reading, options: InitOptions) -> InitResult:
    router_url = options.router_url.rstrip("/")
    base = (await reading.url(router_url)).rstrip("/")
    kind = await _router_kind(reading, base)
    listed = await router_workers(kind, base, reading.http).list()
    if len(listed) > MAX_WORKERS:
        raise WorkerListError(
            f"GET {base}/workers lists {len(listed):,} workers: init reads at most {MAX_WORKERS}"
        )
    usable = [_usable(reading, w, f"{i + 1} of {len(listed)}") for i, w in enumerate(listed)]
    _check_roles(base, listed, usable)
    listed = [w for w, ok in zip(listed, usable, strict=True) if ok]
    engine = ROUTERS[kind].engine
    model = _reported(await reading.model(base, None))
    if model is None:
        reading.gap(None, GapCode.NO_MODEL, f"{router_url}/v1/models")
    workers = await _workers(reading, listed, engine)
    router, port = await _router(reading, router_url, tuple(w.name for w in workers))
    hosts = _hosts(reading, options)
    return InitResult(
        options.name, engine, kind, model, hosts, (*workers, router), tuple(reading.gaps), port
    )


def _usable(reading: _Reading, worker: RouterWorker, where: str) -> bool:
    """A listed worker with an http(s) URL of a host and a port (explicit or the scheme's), and a
    bootstrap port that is one; else a gap naming its place in the list (never its URL, which may
    carry a secret), and it is left out: a hostile list writes nothing into the spec."""
    try:
        parts = urlsplit(parse_url(worker.url))  # http(s), a host, a port that is one
    except OptionError:
        parts = None
    bad = (
        parts is None
        or any(c.isspace() or c in "\"'\\" or not c.isprintable() for c in worker.url)
        or parts.username is not None  # credentials, a query or a path: not a worker's URL
        or bool(parts.query or parts.fragment or parts.path.strip("/"))
        or not (worker.bootstrap_port is None or 1 <= worker.bootstrap_port <= 65535)
    )
    if bad:
        reading.gap(None, GapCode.BAD_WORKER, f"worker {where}")
    return not bad


def _check_roles(base: str, listed: Sequence[RouterWorker], usable: Sequence[bool]) -> None:
    """Refuse (:class:`~servelab.errors.WorkerListError`, exit 2) a list without a usable
    prefill and a usable decode worker: a spec is never written without one of each. The message
    names the router's URL, what it lacks and why each worker was left out (by its place)."""
    roles = {w.role for w, ok in zip(listed, usable, strict=True) if ok}
    lacks = [role for role in ("prefill", "decode") if role not in roles]
    if not lacks:
        return
    why = []
    for place, (worker, ok) in enumerate(zip(listed, usable, strict=True), 1):
        where = f"worker {place} of {len(listed)}"
        if not ok:
            why.append(f"{where}: not an http(s)://host[:port] URL, or a bad bootstrap port")
        elif worker.role not in ("prefill", "decode"):
            why.append(f"{where}: its role {worker.role!r} is neither prefill nor decode")
    said = f" ({'; '.join(why)})" if why else ""
    raise WorkerListError(
        f"GET {base}/workers: lists {len(listed)} worker(s), no usable "
        f"{' and no usable '.join(lacks)} worker{said}: init writes no spec without one "
        "prefill and one decode"
    )


async def _router_kind(reading: _Reading, base: str) -> RouterKind:
    """Which router answers, by its worker list's shape. An answer that is there but not a
    worker list (over 1 MiB, not JSON, nested deeper than a parser goes) is bad input from the
    router (:class:`~servelab.errors.WorkerListError`, exit 2); no answer, or an HTTP error, is
    a router that cannot be read (:class:`~servelab.errors.RouterApiError`, exit 1)."""
    doc = await reading.answer(base, "/workers", None)
    if reading.gaps and reading.gaps[-1].code == GapCode.ANSWER_TOO_LARGE:
        raise WorkerListError(
            f"GET {base}/workers: the router's /workers answer is over {ANSWER_BYTES >> 20} MiB: "
            "not read (a real one is under 64 KiB)"
        )
    if doc is None and reading.status == 200:
        raise WorkerListError(
            f"GET {base}/workers: not a worker list: not JSON, or nested deeper than a parser reads"
        )
    if reading.redirect is not None:
        raise RouterApiError(
            f"GET {base}/workers: redirected ({reading.status}) to {reading.redirect or '?'}, not "
            "followed: something in front of the router (an auth proxy, a login page) answered; "
            "give init the router's own URL"
        )
    if doc is None:
        raise RouterApiError(f"GET {base}/workers: no worker list (is a router listening there?)")
    kind, guessed = router_kind_of(doc)
    if guessed:
        reading.gap(None, GapCode.ROUTER_KIND_GUESSED, str(kind))
    return kind


def _hosts(reading: _Reading, options: InitOptions) -> tuple[FoundHost, ...]:
    spec = options.host
    if spec is None or spec.ssh is None:
        return (FoundHost("local"),)
    return (
        FoundHost("local"),
        FoundHost(reading.host_name, spec.ssh, spec.port, spec.identity_file),
    )


async def _workers(
    reading: _Reading, listed: Sequence[RouterWorker], engine: str
) -> list[FoundService]:
    ordered = [w for role in ("prefill", "decode") for w in listed if w.role == role]
    names = service_names([w.role for w in ordered])
    prefills = tuple(n for n, w in zip(names, ordered, strict=True) if w.role == "prefill")
    found = []
    for name, worker in zip(names, ordered, strict=True):
        service = FoundService(
            name,
            worker.role,
            worker.url,
            reading.host_name,
            worker.bootstrap_port,
            depends_on=prefills if worker.role == "decode" else (),
        )
        if worker.role == "prefill" and worker.bootstrap_port is None:
            reading.gap(name, GapCode.NO_BOOTSTRAP_PORT)
        service = await _engine_report(reading, service, engine)
        found.append(replace(service, start=await _start(reading, service)))
    return found


async def _engine_report(reading: _Reading, service: FoundService, engine: str) -> FoundService:
    base = await reading.url(service.url)
    paths = engine_of(engine).report_paths
    info: Any = None
    for path in paths:
        info = await reading.answer(base, path, service.name)
        if isinstance(info, dict):
            break
    if not isinstance(info, dict):
        reading.gap(service.name, GapCode.NO_SERVER_INFO, f"{service.url}{paths[0]}")
        info = {}
    version = info.get("version")
    if not isinstance(version, str):
        answer = await reading.answer(base, "/version", service.name)
        version = answer.get("version") if isinstance(answer, dict) else None
    model = info.get("model_path") or await reading.model(base, service.name)
    if not isinstance(version, str):
        reading.gap(service.name, GapCode.NO_ENGINE_VERSION)
    return replace(
        service,
        model_path=_reported(model if isinstance(model, str) else None),
        version=_reported(version if isinstance(version, str) else None),
    )


#: The most of a reported string (a model path, a version) the spec keeps.
_REPORTED_CHARS = 200


def _reported(text: str | None) -> str | None:
    """A string a worker or router reported, as the spec may hold it: secrets masked (the one
    redaction policy), every control character (a newline would end a comment and write a line
    of TOML) escaped (:func:`~servelab.core.printable.printable`, the one sanitizer of text from
    the network), at most :data:`_REPORTED_CHARS` characters."""
    if text is None:
        return None
    clean = printable(redact(text))
    return clean if len(clean) <= _REPORTED_CHARS else clean[: _REPORTED_CHARS - 1] + "…"


async def _router(
    reading: _Reading, url: str, workers: tuple[str, ...]
) -> tuple[FoundService, int | None]:
    router = FoundService("router", "router", url, reading.host_name, depends_on=workers)
    start = await _start(reading, router)
    port = await _metrics_port(reading, router, start.pid)
    if start.unit is None and start.argv == ():
        reading.gap("router", GapCode.ROUTER_START_GUESSED)
    if port is None:
        reading.gap("router", GapCode.NO_ROUTER_METRICS_PORT)
    return replace(router, start=start), port


async def _start(reading: _Reading, service: FoundService) -> StartFact:
    """How the process on the service's port starts (its unit, else its command line)."""
    host = reading.host
    port = urlsplit(service.url).port
    if host is None or port is None:
        reading.gap(service.name, GapCode.HOST_NOT_REACHED, urlsplit(service.url).hostname or "")
        return StartFact()
    try:
        pid = await host.listening_pid(port)
        if pid is None:
            reading.gap(service.name, GapCode.NO_PROCESS, f"port {port} on {host.name}")
            return StartFact()
        return await _process_start(reading, host, service.name, pid)
    except ServelabError as exc:
        reading.gap(service.name, GapCode.NO_PROCESS, str(exc))
        return StartFact()


async def _process_start(reading: _Reading, host: Host, service: str, pid: int) -> StartFact:
    cgroup = (await host.read_file(f"/proc/{pid}/cgroup")).decode(errors="replace")
    unit = unit_of_cgroup(cgroup)
    if unit is not None:
        return await _unit_start(reading, host, service, unit, pid)
    raw = await host.read_file(f"/proc/{pid}/cmdline")
    argv = tuple(w.decode(errors="replace") for w in raw.split(b"\0")[:-1])
    reading.gap(service, GapCode.ENV_NOT_COPIED)
    if not argv or "::" in argv[0] or not any(argv[1:]):  # smg::router and blank words
        reading.gap(service, GapCode.ARGV_REWRITTEN, argv[0] if argv else "")
        return StartFact(pid=pid)
    return StartFact(argv=_masked(reading, service, argv), pid=pid)


def _masked(reading: _Reading, service: str, argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` with the value after every secret-looking flag masked (the one redaction policy),
    and a gap saying so: a spec is a file people share, never a secret's home."""
    masked = tuple(redact(word) for word in redact_words(argv))  # and URLs, tokens, keys
    if masked != tuple(argv):
        reading.gap(service, GapCode.SECRET_MASKED)
    return masked


async def _show(host: Host, unit: str, prop: str) -> str:
    cmd = f"systemctl show -p {prop} --value {shlex.quote(unit)}"
    result = await host.run(cmd, timeout=_TIMEOUT_S)
    return result.stdout if result.ok else ""


async def _unit_start(
    reading: _Reading, host: Host, service: str, unit: str, pid: int
) -> StartFact:
    exec_start = await _show(host, unit, "ExecStart")
    argv = exec_start_argv(exec_start)
    if argv is None:
        reading.gap(service, GapCode.NO_EXEC_START, unit)
    files = environment_files(await _show(host, unit, "EnvironmentFiles"))
    env_file = files[0] if files else None
    variables: dict[str, str] = {}
    if env_file is not None:
        try:
            text = (await host.read_file(env_file, limit=MAX_FILE_BYTES)).decode(errors="replace")
            variables = parse_envfile(text, source=env_file).as_dict()
        except (HostError, KnobError):
            variables = {}
    shown = _masked(reading, service, argv) if argv else None
    return StartFact(
        unit=unit,
        exec_start=shlex.join(shown) if shown else None,
        env_file=env_file,
        args_env=args_variable(argv or [], variables),
        pid=pid,
    )


async def _metrics_port(reading: _Reading, router: FoundService, pid: int | None) -> int | None:
    """The router process's other listening port that answers ``/metrics`` (its Prometheus)."""
    host = reading.host
    if host is None or pid is None:
        return None
    tables = await host.run("cat /proc/net/tcp /proc/net/tcp6 2>/dev/null", timeout=_TIMEOUT_S)
    links = await host.run(f"ls -l /proc/{pid}/fd 2>/dev/null", timeout=_TIMEOUT_S)
    ports = listening_inodes(tables.stdout)
    mine = sorted({ports[i] for i in socket_inodes(links.stdout) if i in ports})
    own = urlsplit(router.url).port
    for port in (p for p in mine if p != own):
        url = await reading.url(f"http://127.0.0.1:{port}/metrics")
        result = await reading.http.probe(url, timeout=_TIMEOUT_S)
        if result.status == 200:
            return port
    return None
