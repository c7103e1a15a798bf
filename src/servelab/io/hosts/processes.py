"""Service processes on a host: spawn detached, remember (pid record), check, stop.

A service is launched through the host's shell with ``setsid``, so it leads its own session and
process group (stopping the group stops whatever it forked), with stdout and stderr appended to its
log file and stdin from /dev/null. Its environment is the host's (``os.environ`` locally, the SSH
session's remotely) plus the service's env file, exported by the launch script, which reaches the
host's shell on its stdin (``sh -s``): ``/proc/PID/environ`` shows the knobs, no command line
(``ps``) and no error message holds a value. A shell ``start`` command runs under a small wrapper
that writes its exit status to a file, so servelab can tell "still running" from "exited 0/1".

Pid records are JSON files in the LOCAL state directory (``run/<service>.json``): pid, pgid,
the process's start time (field 22 of ``/proc/PID/stat``: a pid is only "alive" when that still
matches, so a recycled pid is not mistaken for the service), argv or command, log path, host.

Every process servelab launches also carries its mark, ``SERVELAB_SERVICE=<deployment>/<service>``
(:data:`SERVICE_MARK`), in its environment, inherited by whatever it starts: the process serving a
service's port is known as servelab's even when its pid record is lost
(:func:`servelab.io.hosts.discovery.launched_here`).

Waiting for a launched service to be ready is :mod:`servelab.io.hosts.readiness`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG
from typing import Any

from servelab.core.deploy.mark import Mark
from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knobs.places import split_args
from servelab.core.redaction import redact, redact_words
from servelab.errors import CommandTimeout, HostError, ServiceStartError
from servelab.io.files import write_atomic
from servelab.io.hosts.host import Host
from servelab.io.hosts.place import read_place
from servelab.io.specfile import LoadedSpec

__all__ = [
    "LAUNCHER",
    "LAUNCH_TIMEOUT_S",
    "MARK_KEY",
    "MAX_RECORD_BYTES",
    "SERVICE_MARK",
    "PidRecord",
    "ProcStat",
    "command_status",
    "group_members",
    "is_alive",
    "launch_script",
    "parse_proc_stat",
    "pid_record_unreadable",
    "proc_stat",
    "read_pid_record",
    "remove_pid_record",
    "service_log",
    "service_mark",
    "spawn",
    "spec_address",
    "spec_mark",
    "stop_record",
    "write_pid_record",
]


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` servelab uses."""

    pid: int
    state: str
    ppid: int
    pgid: int
    starttime: int


def parse_proc_stat(text: str) -> ProcStat:
    """Parse ``/proc/PID/stat`` (the command name may hold spaces and parentheses)."""
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    pid = int(head.split("(", 1)[0])
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[19]))


@dataclass(frozen=True)
class PidRecord:
    """What servelab remembers about a service it started."""

    service: str
    host: str
    pid: int
    pgid: int
    starttime: int | None
    log: str
    started_at: str
    argv: list[str] | None = None
    command: str | None = None
    status_file: str | None = None
    unit: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As stored: its command line's secret-flag values redacted (spec args may hold one)."""
        argv = None if self.argv is None else redact_words(self.argv)
        return asdict(self) | {"argv": argv, "command": self.command and redact(self.command)}


def _record_path(state_dir: Path, service: str, at: str | None = None) -> Path:
    """``run/<service>.json``; with ``at`` (a service's ``<host>:<port>``), the record a
    deployment keeps there while another deployment's holds the first (issue 38 H1)."""
    return state_dir / "run" / (f"{service}.json" if at is None else f"{service}@{at}.json")


#: The most bytes of a pid record read (one is a few hundred): a larger one is never read whole
#: (a 500 MB ``run/decode.json`` took ``status`` to 1 GB); it is unreadable, as a broken one is.
MAX_RECORD_BYTES = 64 * 1024


def _record_bytes(path: Path) -> bytes | None:
    """The record file's bytes; None when it is not a regular file of at most
    :data:`MAX_RECORD_BYTES` (a FIFO is never opened nor waited on, a device never opened)."""
    if not S_ISREG(os.stat(path).st_mode):
        return None
    with path.open("rb") as stream:
        if not S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        data = stream.read(MAX_RECORD_BYTES + 1)
    return data if len(data) <= MAX_RECORD_BYTES else None


def write_pid_record(state_dir: Path, record: PidRecord, at: str | None = None) -> Path:
    path = _record_path(state_dir, record.service, at)
    write_atomic(path, (json.dumps(record.to_json(), indent=2) + "\n").encode(), parents=True)
    return path


def read_pid_record(state_dir: Path, service: str, at: str | None = None) -> PidRecord | None:
    """The service's pid record, or None (missing or unreadable: treated as not started; so is
    one over :data:`MAX_RECORD_BYTES`, a FIFO or a device, never read whole nor waited on)."""
    path = _record_path(state_dir, service, at)
    try:
        raw = _record_bytes(path)
        return None if raw is None else PidRecord(**json.loads(raw.decode("utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def pid_record_unreadable(state_dir: Path, service: str) -> bool:
    """Whether ``run/<service>.json`` is there (a link too) but reads as no pid record."""
    there = os.path.lexists(_record_path(state_dir, service))  # OSError: False
    return there and read_pid_record(state_dir, service) is None


def remove_pid_record(state_dir: Path, service: str, at: str | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        _record_path(state_dir, service, at).unlink()


async def proc_stat(host: Host, pid: int) -> ProcStat | None:
    """The process's stat, or None when there is no such process."""
    try:
        text = (await host.read_file(f"/proc/{pid}/stat")).decode("utf-8", "replace")
    except HostError:
        return None
    try:
        return parse_proc_stat(text)
    except (ValueError, IndexError):
        return None


async def is_alive(host: Host, record: PidRecord) -> bool:
    """The recorded process still runs (same pid AND same start time; zombies count as dead)."""
    stat = await proc_stat(host, record.pid)
    if stat is None or stat.state in ("Z", "X"):
        return False
    return record.starttime is None or stat.starttime == record.starttime


#: The variable in the environment of every process servelab launches: ``<deployment>/<service>``.
SERVICE_MARK = "SERVELAB_SERVICE"
#: The pid record's ``extra`` key holding that mark: whose record it is (io/hosts/ownrecord.py).
MARK_KEY = "mark"


def service_mark(
    deployment: str, service: str, address: str | None = None, place: str | None = None
) -> str:
    """The value of :data:`SERVICE_MARK` for ``service`` of the deployment named ``deployment``,
    serving at ``address`` (``<host>:<port>``), its pid records in the state folder ``place``
    (:mod:`servelab.io.hosts.place`): ``<deployment>/<service>@<address>#<place>``. The address
    tells apart two specs of one name sharing a state folder (issue 38 H1); the place, two specs
    of one name and one address with their own state folders (the seventeenth pass, H1: the
    second adopted the first's process and stopped it). A mark without the place (nothing
    launched from the folder yet, or an older servelab's), or without the address too (older
    still), is compared as :func:`~servelab.io.hosts.ownrecord.same_deployment` says. The grammar:
    :class:`~servelab.core.deploy.mark.Mark`."""
    return str(Mark(deployment, service, address, None if address is None else place))


def spec_address(spec: DeploymentSpec, service: str) -> str:
    """Where ``service`` of ``spec`` serves: ``<host>:<port>``."""
    svc = spec.service(service)
    return f"{svc.host}:{svc.port}"


def service_log(state_dir: str, service: str, at: str | None = None) -> str:
    """The service's log file: ``<state_dir>/logs/<service>.log``; with ``at`` (its record kept
    aside while another deployment's holds the first place), ``<service>@<at>.log``."""
    return f"{state_dir}/logs/{service if at is None else f'{service}@{at}'}.log"


def spec_mark(loaded: LoadedSpec, service: str) -> str:
    """The mark of ``service`` of the loaded spec: its name, the service, the service's host and
    port, and its state folder's id (:func:`~servelab.io.hosts.place.read_place`; none before
    anything was launched from it)."""
    spec, place = loaded.spec, read_place(loaded.state_dir)
    return service_mark(spec.name, service, spec_address(spec, service), place)


#: Seconds the launcher (``sh -s`` reading :func:`launch_script` on stdin) may take to return.
LAUNCH_TIMEOUT_S = 30.0
#: The launcher's whole command line: the script, env values included, arrives on its stdin.
LAUNCHER = "sh -s"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _exports(env: dict[str, str]) -> str:
    """``export NAME='value'`` words for the launcher's subshell (names checked, values quoted)."""
    bad = [name for name in env if not _NAME.match(name)]
    if bad:
        raise ServiceStartError(f"not a variable name: {', '.join(map(repr, bad))}")
    return "".join(f"export {name}={shlex.quote(value)}; " for name, value in env.items())


def _args_words(args_env: str, env: dict[str, str]) -> str:
    """The ``args_env`` variable's arguments for the command line: from the env file, split as
    systemd splits ``$NAME`` (white space; :func:`~servelab.core.knobs.places.split_args`, what
    servelab reads back) and each quoted, so no shell globs or re-splits them; from the host's
    own environment (not in the env file), ``$NAME`` split by the shell with globbing off."""
    if args_env not in env:
        return f"${args_env}"
    return " ".join(shlex.quote(word) for word in split_args(env[args_env]))


def launch_script(
    *,
    argv: list[str] | None,
    command: str | None,
    env: dict[str, str],
    log: str,
    status_file: str | None,
    cwd: str | None,
    args_env: str | None = None,
    mark: str | None = None,
) -> str:
    """The POSIX shell script that launches a service detached and prints its pid and stat.

    It holds every env value: it is fed to :data:`LAUNCHER` on stdin, never put on a command line
    nor in a message. The values are exported in the subshell that becomes the service, so
    ``/proc/PID/environ`` shows them and ``ps`` does not. With ``args_env``, an ``argv`` ends with
    that variable's words, split at white space as systemd's ``ExecStart=... $SGLANG_ARGS``
    splits them, each quoted (:func:`_args_words`); the subshell runs with globbing off
    (``set -f``), so no word of the command line is ever a file name pattern
    (``--chunked-prefill-size=*`` reaches the engine as written). ``mark``: the value of
    :data:`SERVICE_MARK` the service carries.
    """
    if mark is not None:
        env = {**env, SERVICE_MARK: mark}
    if argv is not None:
        program = " ".join(shlex.quote(arg) for arg in argv)
        if args_env is not None:
            if not _NAME.match(args_env):
                raise ServiceStartError(f"args_env: not a variable name: {args_env!r}")
            program += " " + _args_words(args_env, env)
    else:
        assert command is not None and status_file is not None
        wrapper = 'sh -c "$1"; echo $? > "$2"'
        program = " ".join(
            shlex.quote(word)
            for word in ("sh", "-c", wrapper, "servelab-start", command, status_file)
        )
    lines = [f"mkdir -p {shlex.quote(os.path.dirname(log))}"]
    if status_file is not None:
        lines.append(f"mkdir -p {shlex.quote(os.path.dirname(status_file))}")
        lines.append(f"rm -f {shlex.quote(status_file)}")
    if cwd is not None:
        lines.append(f"cd {shlex.quote(cwd)}")
    stamp = f'echo "--- servelab start $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> {shlex.quote(log)}'
    lines.append(stamp)
    lines.append(  # set -f: nothing on the command line is ever a glob (a value of *)
        f"( set -f; {_exports(env)}exec setsid {program} >> {shlex.quote(log)} 2>&1 < /dev/null ) &"
    )
    lines.append('pid=$!; echo "$pid"; cat "/proc/$pid/stat" 2>/dev/null || true')
    return "\n".join(lines) + "\n"


async def spawn(
    host: Host,
    *,
    service: str,
    log: str,
    env: dict[str, str],
    argv: list[str] | None = None,
    command: str | None = None,
    status_file: str | None = None,
    cwd: str | None = None,
    unit: str | None = None,
    args_env: str | None = None,
    mark: str | None = None,
    launch_timeout_s: float = LAUNCH_TIMEOUT_S,
) -> PidRecord:
    """Launch ``argv`` (exec'd) or a shell ``command`` (wrapped) detached; return its record.

    The launch script goes to the host's ``sh -s`` on stdin; a launcher that outlives
    ``launch_timeout_s`` raises :class:`~servelab.errors.CommandTimeout` naming the service and
    the host only (the script holds the env values). ``mark``: see :func:`launch_script`.
    """
    script = launch_script(
        argv=argv,
        command=command,
        env=env,
        log=log,
        status_file=status_file,
        cwd=cwd,
        args_env=args_env,
        mark=mark,
    )
    try:
        result = await host.run(LAUNCHER, timeout=launch_timeout_s, input=script.encode())
    except CommandTimeout:
        raise CommandTimeout(
            f"{service}: the launch on host {host.name} did not return within "
            f"{launch_timeout_s}s (log {host.name}:{log})"
        ) from None
    first = (result.stdout.splitlines() or [""])[0].strip()
    if result.exit_status != 0 or not (first.isascii() and first.isdigit()):
        said = result.stderr.strip() or result.stdout.strip() or str(result.exit_status)
        raise ServiceStartError(
            f"{service}: could not launch on host {host.name}: {redact(said, env.values())}"
        )
    pid = int(first)
    stat = await _session_leader_stat(host, pid)
    return PidRecord(
        service=service,
        host=host.name,
        pid=pid,
        pgid=pid,
        starttime=stat.starttime if stat else None,
        log=log,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        argv=argv,
        command=command,
        status_file=status_file,
        unit=unit,
        extra={} if mark is None else {MARK_KEY: mark},
    )


async def _session_leader_stat(host: Host, pid: int) -> ProcStat | None:
    """The new process's stat once ``setsid`` made it its group's leader (pgid == pid).

    Right after the launch the child may not have called setsid(2) yet: its group is still the
    launching shell's. The pgid servelab records is the pid itself, which setsid guarantees.
    """
    stat = None
    for _ in range(50):
        stat = await proc_stat(host, pid)
        if stat is None or stat.pgid == pid:
            return stat
        await asyncio.sleep(0.02)
    return stat


#: The most bytes of a status file read: an exit status and its newline.
_STATUS_BYTES = 64


async def command_status(host: Host, record: PidRecord) -> int | None:
    """The exit status a wrapped shell command wrote, or None while it runs (or if unknown)."""
    if record.status_file is None:
        return None
    try:
        raw = await host.read_file(record.status_file, limit=_STATUS_BYTES)
    except HostError:  # unreadable, not a regular file, or larger than an exit status
        return None
    text = raw.decode("utf-8", "replace").strip()
    return int(text) if text.isascii() and text.lstrip("-").isdigit() else None


async def group_members(host: Host, pgid: int) -> list[ProcStat]:
    """Live (non-zombie) processes of the process group ``pgid`` on the host."""
    result = await host.run("cat /proc/[0-9]*/stat 2>/dev/null; true", timeout=30)
    members = []
    for line in result.stdout.splitlines():
        with contextlib.suppress(ValueError, IndexError):
            stat = parse_proc_stat(line)
            if stat.pgid == pgid and stat.state not in ("Z", "X"):
                members.append(stat)
    return members


async def _group_exists(host: Host, pgid: int) -> bool:
    return bool(await group_members(host, pgid))


async def _signal_group(host: Host, pgid: int, signal_name: str) -> None:
    await host.run(f"kill -{signal_name} -{pgid} 2>/dev/null || true", timeout=30)


async def _running(host: Host, record: PidRecord) -> bool:
    return await is_alive(host, record) or await _group_exists(host, record.pgid)


async def _signal(host: Host, record: PidRecord, signal_name: str) -> None:
    await _signal_group(host, record.pgid, signal_name)
    if record.pgid != record.pid and await is_alive(host, record):
        await host.run(f"kill -{signal_name} {record.pid} 2>/dev/null || true", timeout=30)


async def stop_record(host: Host, record: PidRecord, *, grace: float) -> StepOutcome:
    """Stop the record's process group: SIGTERM, SIGKILL after ``grace``. Idempotent.

    Done when neither the recorded process (same start time) nor any live member of its group
    remains. Returns what happened: not running, stopped or killed.
    """
    leader = await is_alive(host, record)
    if not leader and (record.pgid != record.pid or not await _group_exists(host, record.pgid)):
        return StepOutcome.NOT_RUNNING  # gone (a group whose leader died may be someone else's)
    await _signal(host, record, "TERM")
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not await _running(host, record):
            return StepOutcome.STOPPED
        await asyncio.sleep(0.1)
    await _signal(host, record, "KILL")
    for _ in range(50):
        if not await _running(host, record):
            break
        await asyncio.sleep(0.1)
    return StepOutcome.KILLED
