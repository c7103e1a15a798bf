"""``python -m servelab ARGS`` without paying the interpreter's start and the imports each time:
a fork server per pytest worker (:mod:`tests.support.forkserver`, started on first use) forks a
child per call that runs the CLI's own entry point with this process's cwd, environment, umask,
stdin and pipes for stdout/stderr. The child is a real process (its own pid, real pipes, real
files); only the start is skipped. ``SERVELAB_TEST_FORK=0`` runs every call exec'd, as before.

A call whose environment differs from the server's in a name the server's imports read
(``PYTHON*``, the locale, a library's switch: the server lists them) is exec'd: its imports would
have seen another value. So is a call from a process the worker forked, and every call when the
server could not start or was not single-threaded.
"""

from __future__ import annotations

import contextlib
import io
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FORK_ENV", "SERVER", "ForkServer", "Forked", "fork_enabled", "run_forked"]

#: ``SERVELAB_TEST_FORK=0``: every CLI call of the tests is a real exec (no fork server).
FORK_ENV = "SERVELAB_TEST_FORK"
SERVER = Path(__file__).with_name("forkserver.py")
_START_TIMEOUT = 120.0
#: The server runs as ``python -m`` would put it: the cwd first on ``sys.path`` (not the script's
#: folder, whose ``http.py`` would shadow the standard library's).
_BOOT = (
    "import os, runpy, sys; sys.path[0] = os.getcwd(); "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def fork_enabled() -> bool:
    return os.environ.get(FORK_ENV, "1").strip() != "0"


@dataclass(frozen=True)
class Forked:
    """A forked call's outcome: what subprocess.run returns, and the child's CPU seconds."""

    done: subprocess.CompletedProcess[str]
    cpu: float


@dataclass
class ForkServer:
    """A running server: its process, socket, the environment it started with and the names its
    imports read (a call differing there is exec'd), and its own CPU to be ready."""

    process: subprocess.Popen[bytes]
    path: str
    env: dict[str, str]
    names: list[str]
    cpu: float
    wall: float
    owner: int
    parent_end: int

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a call with ``env`` can be forked: its imports would have read the same."""
        if os.getpid() != self.owner or self.process.poll() is not None:
            return False
        names = {n for n in {*env, *self.env} if n.startswith(START_PREFIXES)}
        names |= {*START_NAMES, *self.names}
        return all(env.get(n) == self.env.get(n) for n in names)


#: Names read in C as the interpreter starts or a module is imported, which the server's record of
#: ``os.environ`` reads cannot see: the interpreter's (``PYTHON*``, the locale, the loader's), and
#: OpenSSL's, read when aiohttp makes its verified SSL context at import (``SSL_CERT_FILE``: a
#: test trusting its own CA through it must be exec'd). ``TZ`` is read again in the child.
START_NAMES = ("LANG", "LANGUAGE", "LD_PRELOAD", "LD_LIBRARY_PATH", "OPENSSL_CONF",
               "OPENSSL_MODULES", "SSL_CERT_FILE", "SSL_CERT_DIR")  # fmt: skip
START_PREFIXES = ("PYTHON", "LC_")

_lock = threading.Lock()
_server: ForkServer | None = None
_failed = False


def _start() -> ForkServer | None:
    folder = tempfile.mkdtemp(prefix="servelab-fork-")
    path = os.path.join(folder, "s")
    parent_read, parent_write = os.pipe()  # its end (ours closing with this process) stops it
    env = dict(os.environ)
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", _BOOT, str(SERVER), path, str(parent_read)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, pass_fds=(parent_read,), env=env,
        cwd=SERVER.parents[2],
    )  # fmt: skip
    os.close(parent_read)
    assert process.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        ready = sel.select(_START_TIMEOUT)
        line = process.stdout.readline() if ready else b""
    process.stdout.close()
    try:
        hello = json.loads(line)
    except ValueError:
        hello = None
    if not hello or hello["threads"] != 1:
        process.kill()
        process.wait()
        os.close(parent_write)
        return None
    wall = time.perf_counter() - began
    return ForkServer(
        process, path, env, hello["names"], hello["cpu"], wall, os.getpid(), parent_write
    )


def server() -> tuple[ForkServer | None, bool]:
    """The worker's fork server, started on first use (None: it could not start), and whether
    this call started it."""
    global _server, _failed
    with _lock:
        if _server is not None and _server.owner == os.getpid():
            return _server, False
        if _failed:
            return None, False
        _server = _start()
        _failed = _server is None
        return _server, _server is not None


def _ignored() -> list[int]:
    """The signals this process ignores (a child exec'd by subprocess keeps them ignored), but
    SIGPIPE and SIGXFSZ, which subprocess restores to their default."""
    out = []
    for signum in signal.valid_signals():
        if signum in (signal.SIGPIPE, signal.SIGXFSZ):
            continue
        try:
            if signal.getsignal(signum) == signal.SIG_IGN:
                out.append(int(signum))
        except (OSError, ValueError):
            continue
    return out


def _umask() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    raise OSError("no Umask line in /proc/self/status")


def _stdin() -> int:
    try:
        os.fstat(0)
    except OSError:
        return os.open(os.devnull, os.O_RDONLY)
    return os.dup(0)


def _feed(fd: int, data: bytes) -> threading.Thread:
    """Write ``data`` to the pipe ``fd`` and close it, in a thread (as ``subprocess.run(input=)``
    does beside its reads: a child that reads its output's worth first does not stall). A child
    that ends without reading it all is no error (subprocess ignores that ``EPIPE`` too)."""

    def write() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    feeder = threading.Thread(target=write, name="forkcli-input", daemon=True)
    feeder.start()
    return feeder


def _text(data: bytes) -> str:
    """As subprocess decodes with ``text=True``: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=_encoding()).read()


def _encoding() -> str:
    """What subprocess encodes ``input`` and decodes the output with, ``text=True``."""
    return locale.getpreferredencoding(False)


def _read(conn: socket.socket, deadline: float | None) -> dict[str, Any]:
    """One line of JSON from the server, by ``deadline`` (TimeoutError past it)."""
    data = b""
    while not data.endswith(b"\n"):
        if deadline is not None:
            conn.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = conn.recv(4096)
        if not chunk:
            raise ConnectionError("the fork server hung up")
        data += chunk
    answer: dict[str, Any] = json.loads(data)
    return answer


def _collect(pipes: dict[int, list[bytes]], deadline: float | None) -> bool:
    """Read both pipes to their end; False when the deadline passed first."""
    with selectors.DefaultSelector() as sel:
        for fd in pipes:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    pipes[key.fd].append(chunk)
                else:
                    sel.unregister(key.fd)
    return True


def run_forked(
    srv: ForkServer,
    args: list[str],
    cwd: Path | None,
    env: dict[str, str],
    timeout: float | None,
    *,
    module: str = "servelab",
    input: str | None = None,
) -> Forked:
    """``python -m MODULE ARGS`` forked by ``srv``: as ``subprocess.run(capture_output=True,
    text=True, timeout=timeout, input=input)`` would return it (or raise ``TimeoutExpired`` after
    a SIGKILL): stdin is this process's, or with ``input`` a pipe that is fed it (in the locale's
    encoding) and closed. ``module`` other than servelab is for ``tests/test_forkcli.py``'s
    probe."""
    cmd = [sys.executable, "-m", module, *args]
    # encoded first: text it cannot encode raises before any pipe is made (as subprocess's)
    feed_fd, data = None, None if input is None else input.encode(_encoding())
    request = {
        "module": module,
        "args": args,
        "cwd": os.path.abspath(cwd if cwd is not None else os.getcwd()),
        "env": env,
        "umask": _umask(),
        "ignored": _ignored(),
    }
    body = json.dumps(request).encode()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    if data is None:
        stdin = _stdin()
    else:
        stdin, feed_fd = os.pipe()
    feeder = None
    deadline = None if timeout is None else time.monotonic() + timeout
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(srv.path)
        try:
            socket.send_fds(conn, [len(body).to_bytes(8, "big")], [stdin, out_write, err_write])
            conn.sendall(body)
        finally:
            for fd in (stdin, out_write, err_write):
                os.close(fd)
        if feed_fd is not None and data is not None:
            feeder, feed_fd = _feed(feed_fd, data), None
        _read(conn, None)  # {"pid": N}: forked
        pipes: dict[int, list[bytes]] = {out_read: [], err_read: []}
        finished = _collect(pipes, deadline)
        try:
            status = _read(conn, deadline) if finished else None
        except TimeoutError:
            status = None
        if status is None:
            conn.settimeout(None)
            with contextlib.suppress(OSError):  # answered and hung up just past the deadline
                conn.sendall(b"K")
            with contextlib.suppress(OSError, ValueError):
                _read(conn, None)  # killed and reaped (or it had ended)
            raw_out, raw_err = b"".join(pipes[out_read]), b"".join(pipes[err_read])
            raise subprocess.TimeoutExpired(cmd, timeout or 0.0, output=raw_out, stderr=raw_err)
    finally:
        conn.close()
        os.close(out_read)
        os.close(err_read)
        if feed_fd is not None:  # the request failed before the child could read it
            os.close(feed_fd)
        if feeder is not None:  # the child is gone: its end of the pipe is closed
            feeder.join(None if deadline is None else max(deadline - time.monotonic(), 0.001))
    out, err = _text(b"".join(pipes[out_read])), _text(b"".join(pipes[err_read]))
    done = subprocess.CompletedProcess(cmd, int(status["status"]), out, err)
    return Forked(done, float(status["cpu"]))
