"""The refusals to act on another deployment's things (issue 38), typed: what ``ab``/``tune
--resume``, ``case restore``/``revert``/``bisect --resume``, ``up`` and ``verify`` refuse, and an
``ab`` or ``tune`` on a deployment that is not up, as data (pure).

ops raises them (:class:`RunRefused`, exit 2; :class:`CaseRefused`, exit 2; :class:`PortRefused`,
exit 1; :class:`VerifyRefused`, exit 1: each in :mod:`servelab.errors`' tree, carrying its
``refusal``); their words are made by
:func:`servelab.report.refusals.refusal_words`, which the command line's failure boundary prints.
An exception's own ``str`` is the refusal's fields, as stored where a failure's text is kept (the
ledger's row of a failed ``up``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING

from servelab.core.deploy.whose import Others
from servelab.errors import CaseError, OptionError, ServelabError, ServiceStartError

if TYPE_CHECKING:  # a probe's answer carries pydantic's serializers: not for every command's start
    from servelab.core.deploy.probe import ProbeResult

__all__ = [
    "AnothersBisection",
    "AnothersProcess",
    "AnothersProcesses",
    "AnothersRestore",
    "AnothersRevert",
    "AnothersRun",
    "CaseRefused",
    "NotAsLeft",
    "NotUp",
    "PortHeld",
    "PortRefused",
    "Recorded",
    "Refusal",
    "RouterNotListing",
    "RouterOnWorkerPort",
    "RunRefused",
    "SpecToUse",
    "VerifyRefused",
]


@dataclass(frozen=True)
class SpecToUse:
    """The spec another deployment's thing is acted on with: the file ``path``, the embedded
    default spec (``embedded``), or unknown (``path`` None, not embedded)."""

    path: str | None
    embedded: bool = False


@dataclass(frozen=True)
class AnothersRun:
    """``--resume`` of journalled run ``run_id`` (``kind``: ``ab`` or ``tune``), started on
    ``whose`` (:func:`~servelab.io.hosts.ownrecord.named_deployment`)."""

    kind: str
    run_id: int
    whose: str
    spec: SpecToUse


@dataclass(frozen=True)
class AnothersRestore:
    """``case restore``: case ``case_id``'s revert of ``target`` was ``whose``'s, not ``ours``."""

    case_id: int
    target: str
    whose: str
    ours: str
    spec: SpecToUse


@dataclass(frozen=True)
class AnothersRevert:
    """``case revert``: case ``case_id`` already holds ``whose``'s revert of ``target``."""

    case_id: int
    target: str
    whose: str
    ours: str
    spec: SpecToUse


@dataclass(frozen=True)
class AnothersBisection:
    """``--resume`` of case ``case_id``'s bisection ``bisect_id``, started on ``whose``
    (``deployment``: its spec's name, as its start recorded it)."""

    case_id: int
    bisect_id: int
    whose: str
    ours: str
    deployment: str
    spec: SpecToUse


class Recorded(StrEnum):
    """What was recorded before it named its deployment (:class:`NotAsLeft`)."""

    AB = "ab"  # a journalled A/B (``ab --resume``)
    TUNE = "tune"  # a journalled tune (``tune --resume``)
    REVERT = "revert"  # a case's revert (``case restore``)
    BISECTION = "bisection"  # a case's bisection (``case bisect --resume``, ``investigate``)


@dataclass(frozen=True)
class NotAsLeft:
    """A run, revert or bisection recorded before it named its deployment (``what``; ``run_id``:
    the A/B's, tune's or bisection's id, the revert's case's; ``case_id``: a bisection's case),
    and this deployment's ``service`` ``knob`` is ``found`` (None: unset), not ``left`` (the
    value its own deployment holds: the run's original, the revert's, the bisection's bad), or
    (``missing``) this deployment has no such service."""

    what: Recorded
    run_id: int
    service: str
    knob: str
    found: str | None = None
    left: str | None = None
    missing: bool = False
    case_id: int | None = None


@dataclass(frozen=True)
class PortHeld:
    """``up``: ``service``'s ``port`` on ``host`` is held by ``pid``, which carries another
    deployment's ``mark`` (that process's to set: quoted with care)."""

    service: str
    port: int
    host: str
    pid: int
    mark: str


@dataclass(frozen=True)
class RouterNotListing:
    """``up``: ``service``'s router ``port`` on ``host`` is held by ``pid``, a ready router this
    deployment did not start, whose worker list lacks this spec's workers ``missing``."""

    service: str
    port: int
    host: str
    pid: int
    missing: tuple[str, ...]


@dataclass(frozen=True)
class RouterOnWorkerPort:
    """``up``: the worker ``service``'s (its ``role``: prefill, decode) ``port`` on ``host`` is
    held by ``pid``, a router (``word``: its process title or launcher, that process's to set)."""

    service: str
    role: str
    port: int
    host: str
    pid: int
    word: str


@dataclass(frozen=True)
class NotUp:
    """``command`` (``ab``, ``tune``, ``case test``; ``bench``: ``sends_only``) needs the
    deployment up, and each of ``down`` (a service and its readiness probe's answer) is not
    ready: nothing was started or stopped. ``spec_args`` name the spec (``-f PATH``, empty: the
    default) for the ``up`` that brings it back."""

    command: str
    down: tuple[tuple[str, ProbeResult], ...]
    spec_args: tuple[str, ...] = ()
    #: ``command`` only sends load (``bench``): it needs the services it sends to (the entry
    #: point and the workers behind it) answering, not every one, and changes nothing: ``down``
    #: holds those that gave no answer.
    sends_only: bool = False


@dataclass(frozen=True)
class AnothersProcess:
    """This spec's ``service`` on ``host`` is served by ``pid``, which carries another
    deployment's mark (``others``: whose, against this deployment's own mark)."""

    service: str
    host: str
    pid: int
    others: Others


@dataclass(frozen=True)
class AnothersProcesses:
    """``command`` (``verify``, ``ab``, ``tune``): the ``processes`` serving this spec's services
    are another copy's of this deployment (its name; a copy of a running spec with its own state
    folder runs nothing of its own, the nineteenth pass): verifying would read that copy's
    processes as this one's and record a verdict on them; an A/B or a tune would set this copy's
    env files and restart that copy's processes."""

    processes: tuple[AnothersProcess, ...]
    command: str = "verify"


#: Every refusal; the words ``match`` on it (mypy names a missing case).
Refusal = (
    AnothersRun
    | AnothersRestore
    | AnothersRevert
    | AnothersBisection
    | NotAsLeft
    | NotUp
    | PortHeld
    | RouterNotListing
    | RouterOnWorkerPort
    | AnothersProcesses
)


#: Characters of one field's ``repr`` kept in an exception's own text (a mark is another
#: process's to set, as long as its environment).
_FIELD_CHARS = 200


def _fields(refusal: Refusal) -> str:
    """``refusal`` as its exception's own text: its type and fields, each cut."""
    shown = (f"{f.name}={repr(getattr(refusal, f.name))[:_FIELD_CHARS]}" for f in fields(refusal))
    return f"{type(refusal).__name__}({', '.join(shown)})"


class RunRefused(OptionError):
    """``ab``/``tune`` (a new one on a deployment not up or another copy's, or a ``--resume``)
    refused (exit 2): ``refusal`` says why."""

    def __init__(self, refusal: AnothersRun | NotAsLeft | NotUp | AnothersProcesses) -> None:
        super().__init__(_fields(refusal))
        self.refusal = refusal


class CaseRefused(CaseError):
    """``case restore``/``revert``/``bisect --resume`` refused (exit 2): ``refusal`` says why."""

    def __init__(self, refusal: AnothersRestore | AnothersRevert | AnothersBisection | NotAsLeft):
        super().__init__(_fields(refusal))
        self.refusal = refusal


class PortRefused(ServiceStartError):
    """``up`` refused a service's step (exit 1): its port is another deployment's."""

    def __init__(self, refusal: PortHeld | RouterNotListing | RouterOnWorkerPort) -> None:
        super().__init__(_fields(refusal))
        self.refusal = refusal


class VerifyRefused(ServelabError, RuntimeError):
    """``verify`` refused (exit 1, nothing recorded): ``refusal`` says whose processes serve
    this spec's services."""

    def __init__(self, refusal: AnothersProcesses) -> None:
        super().__init__(_fields(refusal))
        self.refusal = refusal
