"""The knob commands' contract: what ``knob get`` read (:class:`KnobValue`), what ``knob set``
did (:class:`KnobChange`) and what ``knob diff`` found (:class:`KnobDiff`). Pure types built by
:mod:`servelab.ops.knob`, printed (``--json``) as their encoding, worded by ``report/knob.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import computed_field

from servelab.core.knobs.rules import LiveVerdict, live_verdict
from servelab.core.knobs.unread import UnreadKnob
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.redacted import masked_serializer

__all__ = ["KnobChange", "KnobDiff", "KnobValue"]


@dataclass(frozen=True)
class KnobValue:
    """A knob's value in its file, the place it comes from and that place's file (``path``)."""

    _masked = masked_serializer("name", "value", "shadowed")

    service: str
    name: str
    value: str | None
    place: str | None
    path: str
    shadowed: tuple[tuple[str, str | None], ...] = ()
    #: ``[place, word]`` for each word that may be the knob's flag abbreviated, where the engine's
    #: flags are not known: the value is uncertain (left out of the JSON while None).
    abbreviated: Annotated[tuple[tuple[str, str], ...] | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class KnobChange:
    """What ``set_knob`` did. ``restart_needed``: the service runs with another value."""

    _masked = masked_serializer("name", "old", "new", "live", "spec_value")

    service: str
    name: str
    old: str | None
    new: str | None
    changed: bool
    backup_path: str | None
    env_file: str
    restart_needed: bool
    running: bool
    live: str | None
    spec_value: str | None
    change_id: int | None
    live_error: str | None = None
    #: Where the value was written: ``env_file``, or an argument's place (``args_env``,
    #: ``config_file``); ``env_file`` then holds the path of the file written.
    place: str = "env_file"
    #: The running engine does not read the env knob (or its release has no list): the warning
    #: (left out of the JSON while None).
    unread: Annotated[UnreadKnob | None, OMITTED_IF_NONE] = None
    #: ``[service, live value]`` of each other running service that reads the same file and runs
    #: another value: it needs the restart too (``restart SERVICE`` restarts it with the service).
    shared: tuple[tuple[str, str | None], ...] = ()
    #: The services of ``shared`` whose value could not be read back (a router writes over its
    #: command line and environment and has not reported it; a host error): their value there
    #: is None, unknown, never "unset".
    shared_unread: tuple[str, ...] = ()
    #: False when the running service's environment reads blank (a router writes over it, as
    #: sglang-router's title ``sglang::router`` does): ``live`` None is a value not read back,
    #: never "unset", and the restart is needed.
    live_read: bool = True
    #: True: that router's ``live`` read from the copy of the env file servelab kept when it
    #: launched it, which holds the new value (it runs with it: no restart); omitted otherwise.
    launched: Annotated[bool | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class KnobDiff:
    """A knob's value in the env file, in the file's latest backup, and live (None: unset)."""

    _masked = masked_serializer("name", "file", "backup", "live", "spec_value", "shadowed")

    service: str
    name: str
    file: str | None
    backup: str | None
    live: str | None
    spec_value: str | None
    backup_path: str | None
    env_file: str
    pid: int | None
    pid_source: str
    #: Where the file value comes from: ``env_file``, or an argument's place (None: nowhere, the
    #: engine's default); and the places whose values it hides (``[place, value]``).
    place: str | None = "env_file"
    shadowed: tuple[tuple[str, str | None], ...] = ()
    #: As :attr:`KnobValue.abbreviated`: the file value is uncertain.
    abbreviated: Annotated[tuple[tuple[str, str], ...] | None, OMITTED_IF_NONE] = None
    #: As :attr:`KnobChange.live_read`: False, ``live`` None is not read back (no verdict).
    live_read: bool = True
    #: True: a router that wrote over its environment, ``live`` read from the copy of the env
    #: file servelab kept when it launched it (as ``verify`` reads it); omitted otherwise.
    launched: Annotated[bool | None, OMITTED_IF_NONE] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def running(self) -> bool:
        return self.pid is not None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> LiveVerdict | None:
        """File vs live; None when the service is not running or its value not read back."""
        return live_verdict(self.file, self.live) if self.running and self.live_read else None
