"""The write pre-flight of ``up``, ``restart`` and ``restart --rolling``: before anything stops
or starts, every place the command will write is proved writable, so a restart never stops a
service and then fails to write what it needs to start it again, and ``up`` never starts one it
cannot record (issue 38).

- this machine: the pid records' directory (``<state_dir>/run``: a file is created and removed
  in it) and each existing pid record of the plan (replaced or removed), and the ledger file;
- each service's host: its log's directory (``<state_dir>/logs``) and log file (a regular
  file, or none yet: a device, a FIFO or a symbolic link is refused, never written to nor read:
  :mod:`servelab.io.hosts.logs`), the directory of a shell command's status file
  (``<state_dir>/run`` there), and its backup directory when it has an env file or a
  ``config_file`` (a copy of each file as the launch reads it is kept there at each launch: what
  ``restart --rollback`` puts back) or the restart may roll back (then also the env and config
  files a rollback writes).

A directory that does not exist yet is created (as the command would); a probe left in an
append-only directory cannot be removed, and that directory is refused with the rest. A
directory (and the ledger) on a disk with less than :data:`MIN_FREE_BYTES` free for this user
is refused too, saying how much is free (a full disk lets an empty file be made, then fails the
first record written); on an SSH host, where ``df -Pk`` answers. A backup directory needs room
for the copies written there as well: the size of each env and config file (twice with a
rollback: the launch's copy and the pre-restart one).
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from servelab.errors import CommandTimeout, HostError
from servelab.io.files import check_directory
from servelab.io.hosts.discovery import QUERY_TIMEOUT_S
from servelab.io.hosts.logs import LOG_REFUSED
from servelab.io.room import free_bytes
from servelab.ops.arguments import config_path
from servelab.ops.context import Operation

__all__ = ["MIN_FREE_BYTES", "Place", "check_writable", "places"]

#: The least free space a place's disk must have (pid records, a log's lines, a ledger row).
MIN_FREE_BYTES = 64 * 1024


_LEDGER = "the ledger"


@dataclass(frozen=True, slots=True)
class Place:
    """A directory (a file is created and removed in it) or a file (written if it exists) that
    a command will write on ``service``'s host (None: this machine), and what it holds there."""

    service: str | None
    path: str
    what: str
    directory: bool
    #: A file that must be a regular one when it exists (a log: never a device or a FIFO).
    regular: bool = False
    #: Files a copy of which the command writes in this directory (once per copy): its disk
    #: must have room for them beyond :data:`MIN_FREE_BYTES` (the launch copies of a 1 MiB env
    #: file fail on a disk with 64 KiB free, the service stopped).
    copied: tuple[str, ...] = ()


def _host_places(op: Operation, service: str, *, rollback: bool) -> list[Place]:
    state = op.state_dir(service)
    found = [
        Place(service, f"{state}/logs", f"{service}'s log", True),
        Place(service, f"{state}/logs/{service}.log", f"{service}'s log", False, regular=True),
    ]
    if op.spec.service(service).start is not None:
        found.append(Place(service, f"{state}/run", f"{service}'s start status", True))
    config = config_path(op, service)
    if config is not None or op.env_path(service) is not None or rollback:
        files = tuple(p for p in (op.env_path(service), config) if p)  # launched and pre-restart
        copied = files * 2 if rollback else files
        found.append(
            Place(service, op.backup_dir(service), f"{service}'s backups", True, copied=copied)
        )
    if rollback:
        env = op.env_path(service)
        found += [Place(service, p, f"{service}'s rollback", False) for p in (env, config) if p]
    return found


def places(op: Operation, plan: list[str], *, rollback: bool) -> list[Place]:
    """Every place :func:`check_writable` checks for ``plan``, this machine's first."""
    run = op.loaded.state_dir / "run"
    found = [Place(None, str(run), "pid records", True)]
    found += [Place(None, str(run / f"{name}.json"), "pid records", False) for name in plan]
    if op.ledger is not None:
        found.append(Place(None, str(op.ledger.path), _LEDGER, False))
    for name in plan:
        found += _host_places(op, name, rollback=rollback)
    return found


def _local_refused(place: Place) -> str | None:
    """Why ``place`` (on this machine) cannot be written; None: it can."""
    if place.regular and (
        os.path.islink(place.path)
        or (os.path.exists(place.path) and not os.path.isfile(place.path))
    ):  # a link to a file elsewhere would have the launch append to that file
        return LOG_REFUSED
    if place.directory:
        try:
            check_directory(Path(place.path))
        except HostError:
            return ""
    elif os.path.lexists(place.path) and not os.access(place.path, os.W_OK):
        return ""
    if place.directory or place.what == _LEDGER:
        free = free_bytes(Path(place.path))
        need = MIN_FREE_BYTES + sum(_size(path) for path in place.copied)
        if free is not None and free < need:
            return _full(free, need)
    return None


def _size(path: str) -> int:
    """The bytes of the regular file at ``path`` (links followed); 0 for anything else."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return 0
    return found.st_size if stat.S_ISREG(found.st_mode) else 0


def _full(free: int, need: int = MIN_FREE_BYTES) -> str:
    """Why a disk with ``free`` bytes is refused when the command writes ``need`` there."""
    said = f"its disk is full: {free // 1024} KiB free, under {MIN_FREE_BYTES // 1024} KiB"
    if need <= MIN_FREE_BYTES:
        return said
    return (
        f"its disk is too full: {free // 1024:,} KiB free, under the {-(-need // 1024):,} KiB "
        f"written there ({MIN_FREE_BYTES // 1024} KiB, and a copy of each env and config file)"
    )


def _probe_script(checked: list[Place]) -> str:
    """A ``sh`` script printing each place of ``checked`` it cannot write, one a line."""
    lines = []
    for place in checked:
        path = shlex.quote(place.path)
        if place.directory:
            probe = shlex.quote(f"{place.path}/.servelab-probe-XXXXXX")
            test = f'{{ mkdir -p -- {path} && t=$(mktemp {probe}) && rm -f -- "$t"; }}'
        else:
            test = f"{{ [ ! -e {path} ] || [ -w {path} ]; }}"
        lines.append(f"{test} 2>/dev/null || printf '%s\\n' {path}")
        if place.regular:  # a link, or there and not a regular file
            lines.append(
                f"{{ [ ! -L {path} ] && {{ [ ! -e {path} ] || [ -f {path} ]; }}; }} || "
                f"printf 'other\\t%s\\n' {path}"
            )
        if place.directory:  # its free KiB, where df answers
            lines.append(f"n={MIN_FREE_BYTES // 1024}")
            for copied in place.copied:  # and the KiB of each file copied there
                quoted = shlex.quote(copied)
                lines.append(
                    f"[ -f {quoted} ] && s=$(stat -L -c %s -- {quoted} 2>/dev/null) && "
                    "n=$((n + (s + 1023) / 1024))"
                )
            lines.append(
                f"a=$(df -Pk -- {path} 2>/dev/null | awk 'NR==2 {{print $4}}'); "
                f'case $a in \'\'|*[!0-9]*) ;; *) [ "$a" -ge "$n" ] || '
                f'printf \'full\\t%s\\t%s\\t%s\\n\' "$a" "$n" {path};; esac'
            )
    return "\n".join(lines) + "\n"


async def _refused_on(op: Operation, service: str, checked: list[Place]) -> list[tuple[Place, str]]:
    """The places of ``checked`` (on ``service``'s host) that cannot be written, and why."""
    host = op.host(service)
    if host.is_local:
        return _refused_here(checked)
    script = shlex.join(["sh", "-c", _probe_script(checked)])  # not ``sh -s``: that is a launch
    try:
        result = await host.run(script, timeout=QUERY_TIMEOUT_S)
    except CommandTimeout as exc:
        raise HostError(f"{host.name}: the write pre-flight did not answer: {exc}") from exc
    said: dict[str, str] = {}
    for line in result.stdout.splitlines():
        full = line.split("\t", 3)
        if len(full) == 4 and full[0] == "full" and full[1].isdigit() and full[2].isdigit():
            said.setdefault(full[3], _full(int(full[1]) * 1024, int(full[2]) * 1024))
        elif len(full) == 2 and full[0] == "other":
            said[full[1]] = LOG_REFUSED
        else:
            said[line] = ""
    return [(place, said[place.path]) for place in checked if place.path in said]


def _refused_here(checked: list[Place]) -> list[tuple[Place, str]]:
    return [(p, why) for p in checked if (why := _local_refused(p)) is not None]


def _where(op: Operation, place: Place) -> str:
    return "local" if place.service is None else op.host(place.service).name


async def check_writable(op: Operation, plan: list[str], *, rollback: bool) -> None:
    """Raise a :class:`~servelab.errors.HostError` naming each place of :func:`places` that
    cannot be written (nothing has been stopped or started)."""
    by_host: dict[str, tuple[str | None, dict[str, Place]]] = {}
    for place in places(op, plan, rollback=rollback):
        host = _where(op, place)
        by_host.setdefault(host, (place.service, {}))[1].setdefault(place.path, place)
    refused: list[tuple[Place, str]] = []
    for service, checked in by_host.values():
        if service is None:
            refused += _refused_here(list(checked.values()))
        else:
            refused += await _refused_on(op, service, list(checked.values()))
    if refused:
        said = "; ".join(
            f"{_where(op, p)}: cannot write {p.path} ({p.what}){': ' + why if why else ''}"
            for p, why in refused
        )
        raise HostError(f"{said} (pre-flight: nothing was started or stopped)")
