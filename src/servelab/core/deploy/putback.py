"""What a command stopped by a signal did to leave the deployment as it found it (pure data).

A command that changes knobs and co-restarts services (``case test``, ``case revert``,
``case restore``, ``case bisect``, ``ab``, ``tune``) notes each knob's value as it found it; a stop
signal in the middle (Ctrl-C, SIGTERM, SIGHUP) puts those values back and brings the services
back up (:mod:`servelab.ops.deploy.putback`). :class:`PutBack` says what that did, or, when it
could not finish (a second signal, a service that would not start), which services are down and
the command that brings them back. Stored nowhere on its own: the CLI prints it (text and
``--json``); report words it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Annotated

from pydantic import PlainSerializer, computed_field

from servelab.core.redacted import masked_serializer

__all__ = ["KnobBack", "PutBack", "StillLive"]


def _command(argv: tuple[str, ...]) -> str | None:
    """The recovery command as one shell line (None: nothing to recover)."""
    return shlex.join(argv) if argv else None


def _commands(argvs: tuple[tuple[str, ...], ...]) -> list[str]:
    return [shlex.join(argv) for argv in argvs]


@dataclass(frozen=True)
class KnobBack:
    """``service``'s ``knob`` at ``value`` (None: unset): as a command found it."""

    service: str
    knob: str
    value: str | None


@dataclass(frozen=True)
class StillLive:
    """``service`` still runs with ``knob`` at ``live``, another value than its file's (``file``;
    None: unset), as ``knob diff`` reads them: a put-back cut before it co-restarted it.
    ``read`` False: what it runs with could not be read (a router writes over its command line
    and environment, and had not reported the value yet): ``live`` is then None, unknown, never
    a value it was seen to run with, and a restart applies the file to be sure."""

    _masked = masked_serializer("knob", "live", "file")

    service: str
    knob: str
    live: str | None
    file: str | None
    read: bool = True


@dataclass(frozen=True)
class PutBack:
    """The deployment after a stop signal ended a command that changes it.

    ``written``: the knobs written back to the value found; ``restarted``: the services
    co-restarted so the processes run with them; ``down``: the services left down (empty: every
    one is up); ``recovery``: the command that brings them back (``servelab up -f SPEC``);
    ``not_written``: the knobs still at another value than found (their file), ``fixes`` the
    commands that write them back; ``error``: why the
    put-back did not finish; ``interrupted``: a second signal stopped it. When it did not finish,
    ``down`` and ``still_live`` are read from the processes (never assumed from the step that was
    cut): ``still_live`` the knobs a running service holds at another value than its file, and
    then ``recovery`` is the ``servelab restart -f SPEC SERVICE...`` that applies the files
    (it also starts what is down), as it is when a knob of ``not_written`` has its service
    running another value than found (once ``fixes`` wrote it back). ``failure``: the
    command's failure that started the put-back, when a stop signal came during it (the put-back
    went on to its end and the command then stopped as the signal says; None otherwise);
    ``verified``: after it, every knob was read live at the value found and every service was
    ready (False: not so, or not read)."""

    written: tuple[KnobBack, ...] = ()
    restarted: tuple[str, ...] = ()
    down: tuple[str, ...] = ()
    recovery: Annotated[tuple[str, ...], PlainSerializer(_command)] = ()
    not_written: tuple[KnobBack, ...] = ()
    #: The command that writes each knob of ``not_written`` back (``servelab knob set ...``).
    fixes: Annotated[tuple[tuple[str, ...], ...], PlainSerializer(_commands)] = ()
    error: str | None = None
    interrupted: bool = False
    still_live: tuple[StillLive, ...] = ()
    failure: str | None = None
    verified: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """Everything as found: every knob back, every service up."""
        return (not self.down and not self.not_written and not self.still_live
                and self.error is None)  # fmt: skip
