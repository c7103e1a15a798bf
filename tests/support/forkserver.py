"""The fork server of :mod:`tests.support.forkcli`: run as a script (``python -c BOOT
forkserver.py SOCKET FD``), it imports servelab's CLI and every servelab module once, then, for
each request on the unix socket, forks a child that runs what ``python -m servelab ARGS`` runs,
with the caller's cwd, environment, umask, stdin/stdout/stderr (passed as fds) and the signal
dispositions a fresh interpreter has, and answers the child's pid, then its exit status and
rusage (``os.wait4``). The gc is frozen after the imports (a child's exit would otherwise walk,
and so copy, every preloaded object: 0.35 s of CPU). The names of the environment the imports
read are told to the client: a call whose environment differs there is exec'd.

The server stays as it was after its imports: it never runs a command itself, each child forks
from it (never from a used child) and unwinds out of the request loop to :func:`_run_child`, so
the child ends as an interpreter ends (``SystemExit``'s code, a traceback and 1, a
``KeyboardInterrupt`` killing it by SIGINT, atexit handlers, the streams flushed). Single-threaded
(a ``selectors`` loop over the socket, each child's pidfd and the parent's pipe, whose end means
the pytest worker is gone): a thread at fork time would be a lock held forever in the child.

Protocol, per connection: the client sends an 8-byte length with its three fds
(``socket.send_fds``), then that many bytes of JSON (args, cwd, env, umask, the signals it
ignores); the server answers lines of JSON: ``{"pid": N}`` once forked, then ``{"status": CODE,
"cpu": SECONDS}`` (CODE negative for a signal's death, as subprocess has it; SECONDS the child's
user + system time, its reaped descendants' and the server's own for the fork). The client may
send ``K`` to have the child killed (SIGKILL, through its pidfd: never a reused pid).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import os
import pkgutil
import resource
import runpy
import selectors
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["main"]

_HEADER = 8


#: Reads that leave nothing behind a child could see (found by the audit, tests/test_forkcli.py):
#: ``ctypes.util`` copies the whole environment for the ``gcc`` it runs to find a library
#: (asyncssh's liboqs, at import); ``tempfile`` caches its folder, which the child forgets
#: (:func:`_become`). Any other name the imports read must be the call's too.
_TRANSIENT = {("util.py", "_findLib_gcc"), ("tempfile.py", "_candidate_tempdir_list")}


def _transient(frame: FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if (os.path.basename(code.co_filename), code.co_name) in _TRANSIENT:
            return True
        frame = frame.f_back
    return False


@contextmanager
def _names_read(into: set[str]) -> Iterator[None]:
    """While inside, every name read from ``os.environ`` (and ``os.environb``) is added to
    ``into``: what the imports saw, which a call's own environment must match."""
    cls = type(os.environ)
    getitem = cls.__getitem__

    def recorded_getitem(self: Any, key: str | bytes) -> str:
        if not _transient(sys._getframe(1)):
            into.add(os.fsdecode(key))
        return getitem(self, key)

    cls.__getitem__ = recorded_getitem  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__getitem__ = getitem  # type: ignore[method-assign]


def _preload() -> list[str]:
    """Import the CLI, each command's module and every other servelab module (not the heavy
    libraries some functions import when they run: scipy, matplotlib, the OpenAI SDK)."""
    read: set[str] = set()
    with _names_read(read):
        import servelab
        import servelab.cli

        for entry in servelab.cli.COMMANDS.values():
            entry.load()
        for info in pkgutil.walk_packages(servelab.__path__, "servelab."):
            if not info.name.endswith("__main__"):
                __import__(info.name)
        # cli/boundary.py makes its consoles on first use: rich is imported then.
        importlib.import_module("rich.console")
        importlib.import_module("rich.text")
    return sorted(read)


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(min(left, 1 << 16))
        if not chunk:
            raise ConnectionError("the client left mid-request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, fds, _flags, _addr = socket.recv_fds(conn, _HEADER, 3)
    if len(header) != _HEADER or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ConnectionError("a request without its header and three fds")
    body = _recv_exact(conn, int.from_bytes(header, "big"))
    return json.loads(body), fds


def _answer(conn: socket.socket, payload: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the client is gone (its test failed): nothing to tell
        conn.sendall(json.dumps(payload).encode() + b"\n")


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Server:
    """The request loop: accept, fork, watch each child's pidfd, answer its status."""

    def __init__(self, listener: socket.socket, parent_fd: int) -> None:
        self.listener, self.parent_fd = listener, parent_fd
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, "accept")
        self.selector.register(parent_fd, selectors.EVENT_READ, "parent")
        #: pidfd -> (pid, the client's connection, the server's CPU for the fork)
        self.children: dict[int, tuple[int, socket.socket, float]] = {}

    def close_in_child(self) -> None:
        """What the child must not hold: the socket, every connection, pidfd and the pipe."""
        for key in list(self.selector.get_map().values()):
            fileobj = key.fileobj
            if isinstance(fileobj, socket.socket):
                fileobj.close()
            else:
                os.close(int(fileobj))  # type: ignore[call-overload]
        self.selector.close()

    def serve(self) -> dict[str, Any] | None:
        """Serve until the parent is gone (None); in a forked child, its request."""
        while True:
            for key, _ in self.selector.select():
                if key.data == "parent":
                    if not os.read(self.parent_fd, 1):
                        return None
                elif key.data == "accept":
                    child = self._fork(self.listener.accept()[0])
                    if child is not None:
                        return child
                elif key.data == "conn":
                    self._kill(key.fileobj)  # type: ignore[arg-type]
                else:
                    self._reap(key.fd)

    def _fork(self, conn: socket.socket) -> dict[str, Any] | None:
        try:
            request, fds = _request(conn)
        except (OSError, ValueError):
            conn.close()
            return None
        before = _cpu_self()
        pid = os.fork()
        if pid == 0:
            self.close_in_child()
            conn.close()
            request["fds"] = fds
            return request
        cpu = _cpu_self() - before
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        self.children[pidfd] = (pid, conn, cpu)
        self.selector.register(pidfd, selectors.EVENT_READ, "child")
        self.selector.register(conn, selectors.EVENT_READ, "conn")
        _answer(conn, {"pid": pid})
        return None

    def _kill(self, conn: socket.socket) -> None:
        """The client asked for a kill (``K``) or left (EOF): SIGKILL, as subprocess's timeout."""
        try:
            word = conn.recv(1)
        except OSError:
            word = b""
        self.selector.unregister(conn)
        if word != b"K":
            return  # gone: the child runs on, as a subprocess outlives its test
        for pidfd, (_pid, owner, _cpu) in self.children.items():
            if owner is conn:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)

    def _reap(self, pidfd: int) -> None:
        pid, conn, cpu = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _pid, wait_status, usage = os.wait4(pid, 0)
        cpu += usage.ru_utime + usage.ru_stime
        _answer(conn, {"status": os.waitstatus_to_exitcode(wait_status), "cpu": cpu})
        if conn in {key.fileobj for key in self.selector.get_map().values()}:
            self.selector.unregister(conn)
        conn.close()


def _stream(fd: int, name: str, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """``sys.std*`` over ``fd`` as the interpreter makes it (Python/pylifecycle.c
    ``create_stdio``): buffered unless ``-u``/``PYTHONUNBUFFERED`` (then written through),
    line-buffered on a terminal (stderr always), newlines untranslated on POSIX."""
    writing, buffered = fd != 0, not like.write_through
    mode, buffering = ("wb" if writing else "rb"), (-1 if buffered or not writing else 0)
    buffer = open(fd, mode, buffering, closefd=False)  # noqa: SIM115  (sys.std* for the child)
    raw = getattr(buffer, "raw", buffer)
    raw.name = f"<{name}>"
    stream = io.TextIOWrapper(
        buffer,  # type: ignore[arg-type]
        encoding=like.encoding,
        errors=like.errors,
        newline="\n",
        line_buffering=buffered and (os.isatty(fd) or fd == 2),
        write_through=not buffered,
    )
    stream.mode = "w" if writing else "r"  # type: ignore[misc]
    return stream


def _fresh_signals(ignored: set[int]) -> None:
    """The dispositions of ``python`` exec'd by subprocess: what the caller ignores stays ignored,
    the rest default, then Python's own (SIGINT its handler, SIGPIPE and SIGXFSZ ignored)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signum in signal.valid_signals():
        if signum in (signal.SIGKILL, signal.SIGSTOP):
            continue
        with contextlib.suppress(OSError, ValueError):  # one the C library keeps for itself
            signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
    if signal.SIGINT not in ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _become(request: dict[str, Any]) -> None:
    """The forked child takes the caller's fds, signals, umask, cwd and environment."""
    fds: list[int] = request["fds"]
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    _fresh_signals(set(request["ignored"]))
    os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()  # TZ as the call has it (a fresh interpreter reads it as it starts)
    tempfile.tempdir = None  # TMPDIR likewise, on first use
    sys.path[0] = request["cwd"]  # `python -m` puts the cwd first
    sys.stdin = sys.__stdin__ = _stream(0, "stdin", sys.__stdin__)  # type: ignore[arg-type]
    sys.stdout = sys.__stdout__ = _stream(1, "stdout", sys.__stdout__)  # type: ignore[arg-type]
    sys.stderr = sys.__stderr__ = _stream(2, "stderr", sys.__stderr__)  # type: ignore[arg-type]
    sys.argv = ["-m", *request["args"]]


def main() -> dict[str, Any] | None:
    """Preload, answer the hello line on stdout, serve; in a child, return its request."""
    path, parent_fd = sys.argv[2], int(sys.argv[3])
    read = _preload()
    threads = _threads()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    hello = {"names": read, "threads": threads, "cpu": _cpu_self(), "pid": os.getpid()}
    sys.stdout.write(json.dumps(hello) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)
    os.close(devnull)
    if threads != 1:
        return None  # forking a threaded process is unsafe: the client reads the count, execs
    # The preloaded objects out of the collector's sight (gc's own advice for a fork server): a
    # child's collections and its exit would otherwise walk, and so copy, every page of them
    # (about 0.35 s of CPU at each child's exit, 0.05 s with them frozen).
    gc.freeze()
    child = _Server(listener, parent_fd).serve()
    if child is None:  # the worker is gone: its socket and folder with it
        with contextlib.suppress(OSError):
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
    return child


def _run_child(request: dict[str, Any]) -> None:
    _become(request)
    # `python -m servelab` meets servelab.__main__ first as __main__; servelab.cli imports it
    # again under its own name afterwards (as the preloaded CLI already has).
    sys.modules.pop("servelab.__main__", None)
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _child = main()
    if _child is not None:
        _run_child(_child)
