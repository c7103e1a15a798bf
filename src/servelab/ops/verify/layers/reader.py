"""What a knob layer's reader is, and what one verification hands it (the registry's contract).

A knob lives in layers, each able to hold a stale copy (DESIGN "Knobs and their layers"): the file,
what the service manager loaded, the live process, what the engine reports, and the P/D pair the
router forms. Each layer is one :class:`LayerReader` in one module of this folder, registered in
:data:`servelab.ops.verify.layers.registry.READERS`; ``verify`` runs every registered reader whose
:class:`~servelab.core.verify.checks.Layer` was asked for, per service (or once for the deployment,
``per_service`` False), and keeps the checks in registry order within each layer and service.

What several readers need (the env file and its backup, the service's argument knobs, their
places) is read once per service by :class:`ServiceReads`, whichever reader asks first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from servelab.core.knob import Knob
from servelab.core.knobs.places import FileValue
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.redaction import redact
from servelab.core.verify.checks import Check, CheckCode, CheckFailure, EnvFileFailure, Layer
from servelab.errors import ServelabError, UnreadFileError
from servelab.ops.arguments import argument_knob, read_places
from servelab.ops.context import Operation

__all__ = ["LayerReader", "ReadContext", "ServiceReads", "error_text", "failed"]


def error_text(exc: ServelabError) -> str:
    """An error as a check names it: its type and message, secrets masked (the one redaction
    policy: a message may quote what an engine or router answered)."""
    return f"{type(exc).__name__}: {redact(str(exc))}"


def failed(layer: Layer, service: str, exc: ServelabError, file: str | None = None) -> list[Check]:
    """``LAYER.error``: what stopped the layer's check of ``service``; the config layer's names
    the ``file`` it could not read (its data is an :class:`EnvFileFailure`). A file refused
    unread (:class:`~servelab.errors.UnreadFileError`: a FIFO, a device) is bad input, raised:
    the command exits 2 naming it, as every reader of that file does."""
    if isinstance(exc, UnreadFileError):
        raise exc
    if layer is Layer.CONFIG:
        failure = EnvFileFailure(file, error_text(exc))
        return [Check(service, False, CheckCode.CONFIG_ERROR, failure)]
    return [Check(service, False, CheckCode.error_of(layer), CheckFailure(error_text(exc)))]


class ServiceReads:
    """The reads several layers of one service share, each done once (the first asker's task)."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[object]] = {}

    async def once(self, key: str, read: Callable[[], Awaitable[object]]) -> object:
        """The result of ``read()``, run once under ``key``; its exception is raised to every
        asker."""
        task = self._tasks.get(key)
        if task is None:
            task = asyncio.ensure_future(read())
            self._tasks[key] = task
        return await asyncio.shield(task)


@dataclass(frozen=True)
class ReadContext:
    """What one verification gives a reader: the operation, the service (None for a reader of
    the whole deployment), the layers asked for, the services selected, the ledger's last
    recorded change of each of the service's knobs, an event set once a router has routed the
    e2e probe, and the service's shared reads."""

    op: Operation
    service: str | None
    layers: tuple[Layer, ...]
    services: Sequence[str]
    recorded: Mapping[str, KnobChangeRecord] = field(default_factory=dict)
    routed: asyncio.Event | None = None
    reads: ServiceReads = field(default_factory=ServiceReads)

    @property
    def name(self) -> str:
        """The service (a per-service reader only)."""
        assert self.service is not None
        return self.service

    def arguments(self) -> list[Knob]:
        """The service's declared argument knobs (its env knobs are the env file's to check)."""
        knobs = [argument_knob(self.op, name) for name in self.op.spec.service(self.name).knobs]
        return [knob for knob in knobs if not knob.is_env]

    async def places(self, knobs: Sequence[Knob]) -> dict[str, FileValue]:
        """Each argument knob's file value (read once per service)."""

        async def read() -> dict[str, FileValue]:
            return {knob.name: await read_places(self.op, self.name, knob) for knob in knobs}

        found = await self.reads.once("places", read)
        assert isinstance(found, dict)
        return found


@dataclass(frozen=True)
class LayerReader:
    """One knob layer: its name, the verify layer its checks belong to, whether it reads each
    service or the deployment once, and the reader itself."""

    name: str
    layer: Layer
    read: Callable[[ReadContext], Awaitable[list[Check]]]
    per_service: bool = True
