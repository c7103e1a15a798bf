"""One operation context per command: the spec, one host session per host, the ledger, progress.

A command creates one :class:`Operation` (``async with Operation(loaded, ledger=..., progress=...)
as op``) and passes it down: ``run_ab`` -> ``set_knob`` -> ``restart`` -> ``verify`` all use the
same :class:`~servelab.io.hosts.host.Host` objects, so one SSH connection (and one port forward per
service URL) serves the whole command. Hosts are opened on first use and closed together when the
``async with`` ends.

Every operation function takes either an :class:`Operation` (reused, left open) or a bare
:class:`~servelab.io.specfile.LoadedSpec` (a new operation for that call alone, closed at its end):
:func:`operation` turns either into an :class:`Operation`.

Progress is told as typed events (:data:`servelab.core.progress.ProgressEvent`: each feature's
own ``core/<feature>/events.py``, data only, one type per kind of moment) through
``op.say(event)``; ``report/`` words them and the CLI prints them.

The operation remembers the env files it wrote, so a restart that follows a ``knob set`` in the
same command starts the services with the bytes just written instead of reading them back; every
reader that proves something about the file (``verify``, ``knob get``/``diff``/``set``) reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from servelab.core.deploy.spec import DeploymentSpec
from servelab.errors import ServelabError
from servelab.io.hosts.envfiles import backup_dir, write_env_file
from servelab.io.hosts.host import Host, host_for
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec

if TYPE_CHECKING:  # every feature's events: imported by what words them (report/), not here
    from servelab.core.progress import ProgressEvent

__all__ = ["Operation", "Progress", "SpecOrOperation", "operation", "silent"]

#: What an operation tells its caller while it runs: one typed event at a time.
Progress = Callable[["ProgressEvent"], None]


def silent(_event: ProgressEvent) -> None:
    """The progress callback that tells nothing."""


@dataclass
class _Sessions:
    """What every view of one operation shares: its hosts, forwarded URLs and written env files."""

    hosts: dict[str, Host] = field(default_factory=dict)
    urls: dict[str, str] = field(default_factory=dict)
    url_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    written: dict[tuple[str, str], bytes] = field(default_factory=dict)


class Operation:
    """One command's spec, hosts (one per host name, opened lazily), ledger and progress."""

    def __init__(
        self, loaded: LoadedSpec, *, ledger: Ledger | None = None, progress: Progress | None = None
    ) -> None:
        self.loaded = loaded
        self.ledger = ledger
        self.say: Progress = progress or silent
        self._sessions = _Sessions()

    @property
    def spec(self) -> DeploymentSpec:
        return self.loaded.spec

    def host(self, service: str) -> Host:
        """The host the service runs on (created on first use; SSH connects on first command)."""
        name = self.spec.service(service).host
        hosts = self._sessions.hosts
        if name not in hosts:
            hosts[name] = host_for(name, self.spec.hosts[name])
        return hosts[name]

    @property
    def hosts(self) -> dict[str, Host]:
        """The hosts opened so far, by host name."""
        return dict(self._sessions.hosts)

    async def url(self, service: str, path: str = "") -> str:
        """The service's URL (plus ``path``) as reachable from here (over SSH: one forward)."""
        sessions = self._sessions
        async with sessions.url_lock:
            if service not in sessions.urls:
                base = self.spec.service(service).url
                sessions.urls[service] = await self.host(service).http_url(base)
            return sessions.urls[service] + path

    def env_path(self, service: str) -> str | None:
        path = self.loaded.env_file(service)
        return None if path is None else str(path)

    def state_dir(self, service: str) -> str:
        """The state directory on the service's host: locally the spec's; over SSH the spec's
        when absolute, else ``.servelab/<spec name>`` under the login directory."""
        return self.loaded.state_dir_on(self.host(service).is_local)

    def backup_dir(self, service: str) -> str:
        """Where the service's env-file backups live on its host (``<state_dir>/backups/NAME``)."""
        return backup_dir(self.state_dir(service), service)

    async def write_env(self, service: str, path: str, data: bytes, *, backup: bool) -> str | None:
        """Replace the service's env file atomically, first backing it up (``backup``) under the
        state directory (:func:`~servelab.io.hosts.envfiles.write_env_file`); remember it."""
        host = self.host(service)
        where = self.backup_dir(service) if backup else None
        backup_path = await write_env_file(host, path, data, backup_dir=where)
        self._sessions.written[(host.name, path)] = data
        return backup_path

    def written_env(self, service: str, path: str) -> bytes | None:
        """The bytes this operation last wrote to ``path`` on the service's host, if it did."""
        return self._sessions.written.get((self.host(service).name, path))

    def derive(
        self, *, ledger: Ledger | None = None, progress: Progress | None = None
    ) -> Operation:
        """This operation with another ledger or progress (None: keep); hosts stay shared."""
        view = copy.copy(self)
        view.ledger = ledger if ledger is not None else self.ledger
        view.say = progress if progress is not None else self.say
        return view

    def quiet(self) -> Operation:
        """This operation without progress events; hosts stay shared."""
        view = copy.copy(self)
        view.say = silent
        return view

    async def aclose(self) -> None:
        """Close every host (their SSH connections and forwards); the next use reopens."""
        sessions = self._sessions
        hosts, sessions.hosts = list(sessions.hosts.values()), {}
        sessions.urls.clear()
        for host in hosts:
            with contextlib.suppress(ServelabError, OSError):
                await host.aclose()

    async def __aenter__(self) -> Operation:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


SpecOrOperation = LoadedSpec | Operation


@contextlib.asynccontextmanager
async def operation(
    target: SpecOrOperation, *, ledger: Ledger | None = None, progress: Progress | None = None
) -> AsyncIterator[Operation]:
    """The caller's operation (reused, left open; ``ledger``/``progress`` override when given),
    or a new one for a bare spec, closed when the block ends."""
    if isinstance(target, Operation):
        yield target.derive(ledger=ledger, progress=progress)
        return
    async with Operation(target, ledger=ledger, progress=progress) as op:
        yield op
