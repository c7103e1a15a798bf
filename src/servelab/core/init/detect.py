"""Pure readings of what ``servelab init`` gathers: which router answers (by the shape of its
worker list), the services' names, a systemd unit from ``/proc/PID/cgroup``, a unit's
``ExecStart=`` and ``EnvironmentFile=`` from ``systemctl show``, the listening ports of a process.

Worker lists (observed on the pinned routers, ``tests/cli/test_init_cli.py``): sglang-router
0.3.2 lists each worker's ``id``, ``url``, ``worker_type``, ``is_healthy``; smg 1.13 adds each
worker's ``status`` (and ``total``, ``stats`` beside ``workers``); vllm-router 0.1.17 lists no
``id``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from servelab.core.deploy.routers import RouterKind

__all__ = [
    "args_variable",
    "environment_files",
    "exec_start_argv",
    "listening_inodes",
    "router_kind_of",
    "service_names",
    "socket_inodes",
    "unit_of_cgroup",
]


def router_kind_of(doc: Any) -> tuple[RouterKind, bool]:
    """The router kind a ``GET /workers`` document comes from, and whether that is a guess (an
    empty list, or a shape none of the three routers gives: smg then, what runs today)."""
    if not isinstance(doc, dict):
        return RouterKind.SMG, True
    items = [i for i in doc.get("workers") or [] if isinstance(i, dict)]
    if not items:
        return RouterKind.SMG, True
    if any("id" not in i for i in items):
        return RouterKind.VLLM_ROUTER, False
    if any("status" in i for i in items):
        return RouterKind.SMG, False
    return RouterKind.SGLANG_ROUTER, False


def service_names(roles: Sequence[str]) -> list[str]:
    """A name per worker, in order: its role, numbered from 1 when the role has several."""
    counts = {role: roles.count(role) for role in roles}
    seen: dict[str, int] = {}
    names = []
    for role in roles:
        seen[role] = seen.get(role, 0) + 1
        names.append(role if counts[role] == 1 else f"{role}-{seen[role]}")
    return names


def unit_of_cgroup(text: str) -> str | None:
    """The systemd service a process runs in, from its ``/proc/PID/cgroup`` (None: not a
    system service's, e.g. a user session's scope)."""
    for line in text.splitlines():
        path = line.rpartition(":")[2]
        parts = [p for p in path.split("/") if p]
        if parts and parts[0] == "system.slice":
            units = [p for p in parts if p.endswith(".service")]
            if units:
                return units[-1]
    return None


_ARGV = re.compile(r"argv\[\]=(.*?) ;")


def exec_start_argv(value: str) -> list[str] | None:
    """The words of a unit's first ``ExecStart=`` as ``systemctl show -p ExecStart --value``
    prints it (``{ path=... ; argv[]=WORDS ; ignore_errors=no ; ... }``); None: none read."""
    match = _ARGV.search(value)
    if match is None:
        return None
    try:
        return shlex.split(match.group(1))
    except ValueError:
        return match.group(1).split()


def environment_files(value: str) -> list[str]:
    """The paths of ``systemctl show -p EnvironmentFiles --value`` (each ``PATH (ignore_errors=
    ...)``, one a line)."""
    paths = []
    for line in value.splitlines():
        path = line.strip().split(" (", 1)[0].strip()
        if path:
            paths.append(path)
    return paths


_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def args_variable(argv: Sequence[str], variables: Mapping[str, str]) -> str | None:
    """The variable of the env file that ``ExecStart=`` expands as words (``$SGLANG_ARGS``):
    where the server's arguments live. None when it expands none of the file's."""
    for word in argv:
        for name in _VARIABLE.findall(word):
            if name in variables:
                return str(name)
    return None


def listening_inodes(proc_net_tcp: str) -> dict[int, int]:
    """Socket inode -> port of every listening socket in ``/proc/net/tcp`` (or ``tcp6``)."""
    found = {}
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
            found[int(fields[9])] = int(fields[1].rpartition(":")[2], 16)
    return found


_SOCKET = re.compile(r"socket:\[(\d+)\]")


def socket_inodes(fd_links: str) -> set[int]:
    """The socket inodes among a process's open files (``ls -l /proc/PID/fd`` output, or the
    link targets one a line)."""
    return {int(m) for m in _SOCKET.findall(fd_links)}
