"""A TLS front for the tests: nginx (Debian's package) as a plain process, serving ``https://`` on
a free loopback port with a self-signed certificate made at test time, proxying plainly to an
upstream (the real router).

It is transparent: long timeouts, no buffering either way, keep-alive to the upstream, so
whatever a soak through it finds is not its doing. The certificate (``CN=127.0.0.1``, the IP as
its subject alternative name) is the file a client trusts through ``SSL_CERT_FILE``, as Python's
``ssl.create_default_context`` (OpenSSL's default paths) and the OpenAI SDK's httpx read it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support import free_port
from tests.support.proxies import proxy_binary, wait_answering
from tests.support.stack import start_process, stop_process
from tests.support.sysdeps import missing

__all__ = ["TlsFront", "running_tls_front", "self_signed"]

_TEMPS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


@dataclass(frozen=True)
class TlsFront:
    """A running TLS front: its ``https://`` URL, port and the certificate a client trusts."""

    url: str
    port: int
    cert: Path
    workdir: Path


def self_signed(workdir: Path) -> tuple[Path, Path]:
    """A fresh EC key and self-signed certificate for ``127.0.0.1`` under ``workdir``."""
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    curve = "ec_paramgen_curve:prime256v1"
    argv = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", curve, "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert)]  # fmt: skip
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=30)
    except FileNotFoundError:
        missing("openssl is not installed (no openssl on PATH)")
    return cert, key


def _config(workdir: Path, port: int, upstream: str, cert: Path, key: Path) -> str:
    user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
    temps = "\n".join(f"    {kind}_temp_path {workdir / 'tmp' / kind};" for kind in _TEMPS)
    up = upstream.removeprefix("http://").rstrip("/")
    return f"""{user}
worker_processes 1;
daemon off;
pid {workdir / "nginx.pid"};
error_log {workdir / "error.log"} warn;
events {{ worker_connections 256; }}
http {{
    access_log {workdir / "access.log"};
{temps}
    upstream router {{ server {up}; keepalive 16; }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        keepalive_timeout 600s;
        client_max_body_size 0;
        location / {{
            proxy_pass http://router;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_connect_timeout 60s;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
        }}
    }}
}}
"""


@contextlib.contextmanager
def running_tls_front(workdir: Path, upstream: str) -> Iterator[TlsFront]:
    """nginx serving TLS in front of ``upstream`` with its own config, certificate and paths under
    ``workdir``, stopped (by process group) at the end."""
    for kind in ("logs", *(f"tmp/{k}" for k in _TEMPS)):
        (workdir / kind).mkdir(parents=True, exist_ok=True)
    cert, key = self_signed(workdir)
    port = free_port()
    conf = workdir / "nginx.conf"
    conf.write_text(_config(workdir, port, upstream, cert, key))
    log = workdir / "nginx.log"
    proc = start_process([proxy_binary("nginx"), "-p", str(workdir), "-c", str(conf)], log)
    try:
        url = f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(cert))  # trusted: the soak's own trust
        wait_answering(url + "/health", proc, log, context=context)
        yield TlsFront(url, port, cert, workdir)
    finally:
        stop_process(proc)
