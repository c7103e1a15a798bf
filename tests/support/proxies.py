"""Real reverse proxies for the tests: nginx, HAProxy and Varnish (Debian's packages) as plain
processes.

Each runs in the foreground in its own process group with its own config file, pid file, logs and
temporary paths under the test's directory, on a free loopback port, in front of an upstream (the
real sglang-router): never the system service. A proxy is described by its kind and the
misconfiguration it carries (:class:`ProxyConfig`: ``extra`` lines inside nginx's ``location`` /
HAProxy's backend, ``server-options ...`` on HAProxy's server line, ``top`` lines in nginx's
``http`` block or HAProxy's ``defaults``; for Varnish, ``extra`` holds ``varnishd -p`` parameters
and ``top`` lines of its VCL); :func:`config_text` writes the file,
:func:`proxy_argv` the command line (``up`` runs the same one from a spec), :func:`running_proxy`
starts it and waits for it to answer. Their absence fails the test in CI or as root and skips it
for a developer without root (:mod:`.sysdeps`).

The failure classes of issue 25 (:data:`CLASSES`) are soaked through them by
:func:`soak_through` (``tests/ops/soak/test_proxies.py`` once each,
``benchmarks/proxy_classes.py`` N times each), and :func:`verdict` / :func:`expected` read what
the soak said against what the class must give.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.ops.soak.soak import soak
from tests.support import free_port
from tests.support.stack import start_process, stop_process
from tests.support.sysdeps import missing

__all__ = [
    "CLASSES",
    "SLOW_PREFILL_ARGS",
    "STACK_SCALES",
    "ProxyClass",
    "ProxyConfig",
    "RunningProxy",
    "Verdict",
    "config_text",
    "engines_idle",
    "expected",
    "proxy_argv",
    "proxy_binary",
    "running_proxy",
    "soak_through",
    "verdict",
    "wait_answering",
    "write_config",
]

Kind = Literal["nginx", "haproxy", "varnish"]

#: Each kind's program (Debian installs them in /usr/sbin).
_BINARY: dict[Kind, str] = {"nginx": "nginx", "haproxy": "haproxy", "varnish": "varnishd"}


def proxy_binary(kind: Kind) -> str:
    """The path of nginx, haproxy or varnishd (Debian installs them in /usr/sbin), else
    :func:`missing`."""
    name = _BINARY[kind]
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
    if found is None:
        missing(f"{kind} is not installed (no {name} on PATH or in /usr/sbin)")
    return found


@dataclass(frozen=True)
class ProxyConfig:
    """A proxy and what is wrong with it (nothing: the clean control)."""

    kind: Kind
    name: str = "clean"
    extra: tuple[str, ...] = ()
    top: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunningProxy:
    """A proxy's place: its config, URL and port, directory (config, pid, logs, temp paths) and
    config file."""

    config: ProxyConfig
    url: str
    port: int
    workdir: Path
    config_file: Path


#: nginx's temporary paths, each under the proxy's own directory.
_NGINX_TEMPS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def _nginx(cfg: ProxyConfig, workdir: Path, port: int, upstream: str) -> str:
    tmp = workdir / "tmp"
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    temp = "\n".join(f"    {kind}_temp_path {tmp / kind};" for kind in _NGINX_TEMPS)
    up = upstream.removeprefix("http://").rstrip("/")
    lines = [
        user,
        "worker_processes 1;",
        "daemon off;",
        f"pid {workdir / 'nginx.pid'};",
        f"error_log {workdir / 'error.log'} warn;",
        "events { worker_connections 256; }",
        "http {",
        f"    access_log {workdir / 'access.log'};",
        temp,
        *(f"    {line}" for line in cfg.top),
        f"    upstream router {{ server {up}; keepalive 16; }}",
        "    server {",
        f"        listen 127.0.0.1:{port};",
        "        location / {",
        "            proxy_pass http://router;",
        "            proxy_http_version 1.1;",
        '            proxy_set_header Connection "";',
        *(f"            {line}" for line in cfg.extra),
        "        }",
        "    }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _haproxy(cfg: ProxyConfig, workdir: Path, port: int, upstream: str) -> str:
    up = upstream.removeprefix("http://").rstrip("/")
    extra = [line for line in cfg.extra if not line.startswith("server-options ")]
    options = " ".join(
        line.removeprefix("server-options ")
        for line in cfg.extra
        if line.startswith("server-options ")
    )
    lines = [
        "global",
        f"    pidfile {workdir / 'haproxy.pid'}",
        "    log stdout format raw local0 info",
        "defaults",
        "    mode http",
        "    log global",
        "    option httplog",
        "    timeout connect 5s",
        "    timeout client 60s",
        "    timeout server 60s",
        *(f"    {line}" for line in cfg.top),
        "frontend entry",
        f"    bind 127.0.0.1:{port}",
        "    default_backend router",
        "backend router",
        *(f"    {line}" for line in extra),
        f"    server router {up} {options}".rstrip(),
    ]
    return "\n".join(lines) + "\n"


def _varnish(cfg: ProxyConfig, upstream: str) -> str:
    """Varnish's VCL: the router as its one backend, every request passed (never cached, as in
    front of an API); its listening address and parameters are on the command line."""
    host, _, port = upstream.removeprefix("http://").rstrip("/").rpartition(":")
    lines = [
        "vcl 4.1;",
        f'backend router {{ .host = "{host}"; .port = "{port}"; }}',
        "sub vcl_recv { return (pass); }",
        *cfg.top,
    ]
    return "\n".join(lines) + "\n"


#: Varnish's parameters in every config: client connections kept alive as long as nginx's
#: default (Varnish's own 5 s would be another class, the idle close, beside the one meant).
VARNISH_PARAMS = ("timeout_idle=75",)


def config_text(cfg: ProxyConfig, workdir: Path, port: int, upstream: str) -> str:
    """The proxy's whole config file: listening on ``127.0.0.1:port``, forwarding to ``upstream``,
    every path it writes under ``workdir`` (Varnish's address is on its command line)."""
    if cfg.kind == "nginx":
        return _nginx(cfg, workdir, port, upstream)
    if cfg.kind == "varnish":
        return _varnish(cfg, upstream)
    return _haproxy(cfg, workdir, port, upstream)


def proxy_argv(
    kind: Kind, workdir: Path, config_file: Path, port: int = 0, params: tuple[str, ...] = ()
) -> list[str]:
    """The foreground command line of the proxy with its own config (and prefix, for nginx;
    and, for Varnish, its instance directory, ``127.0.0.1:port`` and ``params``; ``-j none``: no
    privilege separation, so it reads the test's private directory as the user it runs as)."""
    binary = proxy_binary(kind)
    if kind == "nginx":
        return [binary, "-p", str(workdir), "-c", str(config_file)]
    if kind == "varnish":
        opts = [arg for p in (*VARNISH_PARAMS, *params) for arg in ("-p", p)]
        inst = ["-n", str(workdir / "varnish"), "-f", str(config_file)]
        return [binary, "-F", "-j", "none", *inst, "-a", f"127.0.0.1:{port}", *opts, "-s",
                "malloc,32m"]  # fmt: skip
    return [binary, "-db", "-f", str(config_file)]


def wait_answering(
    url: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    timeout: float = 30.0,
    context: ssl.SSLContext | None = None,
) -> None:
    """Until the proxy at ``url`` answers anything over HTTP (an upstream's error counts: it
    listens), over TLS with ``context``; its log's tail in the error when it exits first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy exited ({proc.returncode}): {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"proxy at {url} not answering after {timeout:g} s")
        time.sleep(0.05)


def write_config(
    cfg: ProxyConfig, workdir: Path, upstream: str, port: int | None = None
) -> RunningProxy:
    """The proxy's directory and config file, on a free port (not started)."""
    (workdir / "logs").mkdir(parents=True, exist_ok=True)  # nginx opens its prefix's first
    for kind in _NGINX_TEMPS:
        (workdir / "tmp" / kind).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config_file = workdir / (f"{cfg.kind}.conf" if cfg.kind != "varnish" else "varnish.vcl")
    config_file.write_text(config_text(cfg, workdir, port, upstream))
    return RunningProxy(cfg, f"http://127.0.0.1:{port}", port, workdir, config_file)


@contextlib.contextmanager
def running_proxy(cfg: ProxyConfig, workdir: Path, upstream: str) -> Iterator[RunningProxy]:
    """The proxy started with its own config under ``workdir``, stopped (by process group) at the
    end."""
    proxy = write_config(cfg, workdir, upstream)
    log = workdir / "proxy.log"
    params = cfg.extra if cfg.kind == "varnish" else ()
    argv = proxy_argv(cfg.kind, workdir, proxy.config_file, proxy.port, params)
    proc = start_process(argv, log)
    try:
        wait_answering(proxy.url + "/health", proc, log)
        yield proxy
    finally:
        stop_process(proc)


# ------------------------------------------------------------------------ the failure classes
Stack = Literal["fast", "slow"]

#: The simulated engines' time scale of each stack: ``fast`` answers 24 tokens in about 0.3 s;
#: ``slow`` (ten times the modelled time) makes a 13 KB prompt's first token wait past a second
#: and a stream last seconds, for the timeout and buffering classes.
STACK_SCALES: dict[Stack, float] = {"fast": 0.5, "slow": 10.0}


@dataclass(frozen=True)
class ProxyClass:
    """One failure class of issue 25 (or the clean control): the misconfigured proxy, the stack
    it stands in front of, the soak that meets it, and what the localization must say."""

    name: str
    letter: str  # a-e, or "clean"
    proxy: ProxyConfig
    stack: Stack
    soak: Mapping[str, object]
    reason: str | None = None  # the matrix's located reason (None: no finding at all)
    dependence: str | None = None  # what the failure depends on (None: not asserted)


#: The slow stack's prefill: no prefix cache, so a growing history's first token waits for the
#: whole prompt (the read-timeout class needs it; the prefill's cache would serve it in time).
SLOW_PREFILL_ARGS = ("--disable-radix-cache",)

_FAST = {"sessions": 2, "rounds": 4, "idle_timeout_s": 3.0, "duration_s": 60.0}
_SLOW = {"sessions": 1, "idle_timeout_s": 8.0, "duration_s": 90.0, "check_determinism": False}

#: Every class, each as deployments get misconfigured, and the clean controls.
CLASSES = (
    ProxyClass(
        "body_limit", "a", ProxyConfig("nginx", "body_limit", top=("client_max_body_size 3k;",)),
        "fast", _FAST, "proxy", "size",
    ),
    ProxyClass(
        "read_timeout", "b",
        ProxyConfig("nginx", "read_timeout", extra=("proxy_read_timeout 1050ms;",)),
        "slow", _SLOW | {"rounds": 3, "turn_words": 600, "max_tokens": 4}, "proxy", "size",
    ),
    ProxyClass(
        "conn_limit", "c",
        ProxyConfig("haproxy", "conn_limit", extra=("timeout queue 100ms",
                                                      "server-options maxconn 1")),
        "fast", _FAST | {"sessions": 6, "rounds": 3}, "proxy", "load",
    ),
    ProxyClass(
        "rate_limit", "c",
        ProxyConfig(
            "nginx", "rate_limit",
            top=("limit_req_zone $binary_remote_addr zone=r:1m rate=2r/s;",
                 "limit_req_status 429;"),
            extra=("limit_req zone=r burst=1 nodelay;",),
        ),
        "fast", _FAST | {"sessions": 4}, "proxy", "load",
    ),
    ProxyClass(
        "idle_close", "d", ProxyConfig("nginx", "idle_close", top=("keepalive_timeout 1s;",)),
        "fast", _FAST | {"rounds": 3, "think_time_s": 2.0}, "connection_reuse",
    ),
    ProxyClass(
        "buffering", "e",
        ProxyConfig("haproxy", "buffering",
                    extra=("http-response wait-for-body time 30s at-least 64k",)),
        "slow", _SLOW | {"rounds": 2, "max_tokens": 16}, "held", "length",
    ),
    # Varnish's send_timeout is the TOTAL time to send a response (varnishd -x parameter: "Total
    # timeout for ordinary HTTP1 responses"; its idle_send_timeout is the idle one): 1.5 s cuts
    # the sessions' answers, which stream for 2-4 s on the slow stack (an agent's answer is often
    # a short tool call, whatever max_tokens says), while a one-token answer (0.25 s) and the
    # matrix's minimal payload (about 1 s) get through: depends on the answer's length.
    ProxyClass(
        "total_timeout", "f", ProxyConfig("varnish", "total_timeout", extra=("send_timeout=1.5",)),
        "slow", _SLOW | {"rounds": 2, "max_tokens": 48, "duration_s": 120.0}, "proxy", "length",
    ),
    ProxyClass("clean_nginx", "clean", ProxyConfig("nginx"), "fast", _FAST),
    ProxyClass("clean_haproxy", "clean", ProxyConfig("haproxy"), "fast", _FAST),
)  # fmt: skip


def engines_idle(targets: Targets, timeout: float = 120.0) -> None:
    """Wait until no engine has a request running or queued (a soak before this one may have
    left its cut replays generating), bounded by ``timeout``."""
    deadline = time.monotonic() + timeout
    for worker in targets.workers:
        while True:
            with urllib.request.urlopen(worker.url + "/metrics", timeout=5) as resp:
                text = resp.read().decode()
            busy = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith(("sglang:num_running_reqs", "sglang:num_queue_reqs"))
            )
            if busy == 0:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{worker.service} still busy after {timeout:g} s")
            time.sleep(0.1)


def soak_through(
    cls: ProxyClass, targets: Targets, workdir: Path, **over: object
) -> tuple[SoakResult, float]:
    """Once the engines are idle: the class's proxy started under ``workdir`` in front of
    ``targets``' router, the class's soak (``over`` replaces its settings) through it, the proxy
    stopped; the result and the soak's wall time."""
    assert targets.router_url is not None
    engines_idle(targets)
    with running_proxy(cls.proxy, workdir, targets.router_url) as proxy:
        config = SoakConfig(**{**cls.soak, **over})  # type: ignore[arg-type]
        start = time.monotonic()
        result = asyncio.run(soak(config, replace(targets, entry_url=proxy.url)))
        return result, time.monotonic() - start


@dataclass(frozen=True)
class Verdict:
    """What one soak through a class's proxy said, as the closing table reads it."""

    findings: tuple[str, ...]  # the layers convicted, most likely first
    reason: str | None  # the located reason of the localization that convicted the proxy
    dependence: str | None
    others: int  # layers other than client_proxy convicted
    ok: bool

    @property
    def right(self) -> bool:
        return self.others == 0


def verdict(result: SoakResult) -> Verdict:
    """The findings' layers, and the reason and dependence of the matrix that located the proxy
    (the first such localization)."""
    layers = tuple(f.layer.value for f in result.findings)
    located = [
        loc.matrix.located for loc in result.localizations if loc.matrix.located.layer is not None
    ]
    proxy = next((loc for loc in located if loc.layer == "client_proxy"), None)
    reason = None if proxy is None else proxy.reason.value
    depends = None if proxy is None or proxy.dependence is None else proxy.dependence.value
    others = sum(layer != "client_proxy" for layer in layers)
    return Verdict(layers, reason, depends, others, result.ok)


def expected(cls: ProxyClass, seen: Verdict) -> list[str]:
    """How ``seen`` differs from what the class must give (empty: right)."""
    if cls.reason is None:
        return [] if seen.ok and not seen.findings else [f"the clean proxy gave {seen}"]
    wrong = []
    if seen.findings != ("client_proxy",):
        wrong.append(f"findings {seen.findings}, not the proxy alone")
    if seen.reason != cls.reason:
        wrong.append(f"reason {seen.reason}, not {cls.reason}")
    if cls.dependence is not None and seen.dependence != cls.dependence:
        wrong.append(f"depends on {seen.dependence}, not {cls.dependence}")
    return wrong
