"""Real reverse proxies for the tests: nginx and HAProxy (Debian's packages) as plain processes.

Each runs in the foreground in its own process group with its own config file, pid file, logs and
temporary paths under the test's directory, on a free loopback port, in front of an upstream (the
real sglang-router): never the system service. A proxy is described by its kind and the
misconfiguration it carries (:class:`ProxyConfig`: ``extra`` lines inside nginx's ``location`` /
HAProxy's backend, ``frontend`` lines in HAProxy's frontend or nginx's ``server`` block, ``top``
lines in nginx's ``http`` block or HAProxy's ``defaults``); :func:`config_text` writes the file,
:func:`proxy_argv` the command line (``up`` runs the same one from a spec), :func:`running_proxy`
starts it and waits for it to answer. Their absence fails the test in CI or as root and skips it
for a developer without root (:mod:`.sysdeps`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tests.support import free_port
from tests.support.stack import start_process, stop_process
from tests.support.sysdeps import missing

__all__ = [
    "ProxyConfig",
    "RunningProxy",
    "config_text",
    "proxy_argv",
    "proxy_binary",
    "running_proxy",
]

Kind = Literal["nginx", "haproxy"]


def proxy_binary(kind: Kind) -> str:
    """The path of nginx or haproxy (Debian installs both in /usr/sbin), else :func:`missing`."""
    found = shutil.which(kind) or shutil.which(kind, path="/usr/sbin:/usr/local/sbin")
    if found is None:
        missing(f"{kind} is not installed (no {kind} on PATH or in /usr/sbin)")
    return found


@dataclass(frozen=True)
class ProxyConfig:
    """A proxy and what is wrong with it (nothing: the clean control)."""

    kind: Kind
    name: str = "clean"
    extra: tuple[str, ...] = ()
    frontend: tuple[str, ...] = ()
    top: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunningProxy:
    config: ProxyConfig
    url: str
    port: int
    workdir: Path
    config_file: Path


def _nginx(cfg: ProxyConfig, workdir: Path, port: int, upstream: str) -> str:
    tmp = workdir / "tmp"
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {tmp / kind};" for kind in ("client_body", "proxy", "fastcgi",
                                                         "uwsgi", "scgi")
    )  # fmt: skip
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
        *(f"        {line}" for line in cfg.frontend),
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
        *(f"    {line}" for line in cfg.frontend),
        "    default_backend router",
        "backend router",
        *(f"    {line}" for line in extra),
        f"    server router {up} {options}".rstrip(),
    ]
    return "\n".join(lines) + "\n"


def config_text(cfg: ProxyConfig, workdir: Path, port: int, upstream: str) -> str:
    """The proxy's whole config file: listening on ``127.0.0.1:port``, forwarding to ``upstream``,
    every path it writes under ``workdir``."""
    if cfg.kind == "nginx":
        return _nginx(cfg, workdir, port, upstream)
    return _haproxy(cfg, workdir, port, upstream)


def proxy_argv(kind: Kind, workdir: Path, config_file: Path) -> list[str]:
    """The foreground command line of the proxy with its own config (and prefix, for nginx)."""
    binary = proxy_binary(kind)
    if kind == "nginx":
        return [binary, "-p", str(workdir), "-c", str(config_file)]
    return [binary, "-db", "-f", str(config_file)]


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> None:
    """Until the proxy answers anything over HTTP (an upstream's error counts: it listens)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"proxy exited ({proc.returncode}): {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(url, timeout=2):
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
    workdir.mkdir(parents=True, exist_ok=True)
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (workdir / "tmp" / kind).mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    config_file = workdir / f"{cfg.kind}.conf"
    config_file.write_text(config_text(cfg, workdir, port, upstream))
    return RunningProxy(cfg, f"http://127.0.0.1:{port}", port, workdir, config_file)


@contextlib.contextmanager
def running_proxy(cfg: ProxyConfig, workdir: Path, upstream: str) -> Iterator[RunningProxy]:
    """The proxy started with its own config under ``workdir``, stopped (by process group) at the
    end."""
    proxy = write_config(cfg, workdir, upstream)
    log = workdir / "proxy.log"
    proc = start_process(proxy_argv(cfg.kind, workdir, proxy.config_file), log)
    try:
        _wait(proxy.url + "/health", proc, log)
        yield proxy
    finally:
        stop_process(proc)
