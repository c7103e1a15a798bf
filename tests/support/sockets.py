"""Another process's TCP sockets, for checking their options: ``pidfd_getfd(2)`` duplicates a
descriptor of a running process (root, or a process we may ptrace), and the duplicate shares the
socket, so ``getsockopt``/``setsockopt`` on it read and change the process's own socket."""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Iterator

__all__ = ["nodelay", "tcp_sockets"]

_SYS_PIDFD_GETFD = 438  # the same number on x86-64 and arm64
_LIBC = ctypes.CDLL(None, use_errno=True)


def _getfd(pidfd: int, fd: int) -> int:
    dup = int(_LIBC.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0))
    if dup < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pidfd_getfd({fd}): {os.strerror(err)}")
    return dup


@contextlib.contextmanager
def tcp_sockets(pid: int) -> Iterator[list[socket.socket]]:
    """The connected TCP sockets of process ``pid`` (listening ones left out), as duplicates
    closed when the block ends (the process's own descriptors stay open)."""
    pidfd = os.pidfd_open(pid)
    found: list[socket.socket] = []
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if not os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                    continue
                sock = socket.socket(fileno=_getfd(pidfd, int(name)))
                if sock.family == socket.AF_INET and sock.type == socket.SOCK_STREAM:
                    with contextlib.suppress(OSError):
                        sock.getpeername()  # a listening socket has no peer
                        found.append(sock)
                        continue
                sock.close()
        yield found
    finally:
        for sock in found:
            sock.close()
        os.close(pidfd)


def nodelay(sock: socket.socket) -> bool:
    """Whether ``TCP_NODELAY`` is set (Nagle's algorithm off) on ``sock``."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
