"""What a verification check is: its layer, its outcome code, and its data, a type per kind (pure).

A :class:`Check` carries the service it is about, pass/fail, one :class:`CheckCode`
(``LAYER.OUTCOME``: short, stable, stored in the ledger; ``LAYER.error``: an error stopped the
layer's check) and its data: one frozen dataclass per kind of fact (:data:`CheckData`; which code
carries which kind: :data:`DATA_OF`). An env knob's data (the config and live layers) is here; the
other kinds live with their layer: an argument knob's in :mod:`servelab.core.verify.arguments`, the
pair's in :mod:`~servelab.core.verify.pair`, the readiness endpoints' in
:mod:`~servelab.core.verify.health`, the e2e requests' in :mod:`~servelab.core.verify.e2e` and the
answer probes' in :mod:`~servelab.core.verify.answers`. The sentence a person reads is rendered
from the data by :func:`servelab.report.verify.check_detail`, matching on its type; nothing below
``report/`` words a check.

In JSON (``verify --json``, a restart's report, a case event's failed checks, the ledger's export) a
check is flat: ``{**data, "layer", "service", "ok", "code"}``, its data encoded by
:mod:`servelab.core.ledger.codec`; a datum that is not known (a router's worker counts, a second
probe) is left out, as it always was. The ledger's ``verification_checks`` row holds the code in its
``detail`` column and the data in ``data``.

A knob is named as the operator writes it (``knob``: an env variable's name; an argument's
``--name``, a flag, a JSON key ``--name.key``: the text every knob command takes and the ledger's
knob changes hold, from which its kind is read). Each layer a knob is read at has its own field,
named by the layer: ``file`` (and ``spec``, ``backup``) in the config layer, ``live`` in the live
layer; a layer not read yet (what the service manager loaded, what the engine reports in
``/server_info``) or an argument's place will be a field of its own, left out while unknown, so
the JSON of an env knob stays as it is.

A stored check that cannot be typed reads as an ``UntypedCheck`` with its text and data as stored
(:mod:`servelab.core.verify.record`): an older ledger's row that holds its sentence instead of a
code, a code this servelab does not know, or data that does not fit its code's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.relaunch import SettingChange
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import UnreadKnob
from servelab.core.ledger.codec import Omitted
from servelab.core.redacted import masked_serializer
from servelab.core.verify.answers import AnswerProbes
from servelab.core.verify.arguments import (
    ArgumentDropped,
    ArgumentInFile,
    ArgumentLive,
    ArgumentVerdict,
    UnitState,
)
from servelab.core.verify.e2e import E2EProbe, WorkerReach
from servelab.core.verify.health import HealthProbe
from servelab.core.verify.pair import PairReport

__all__ = [
    "DATA_OF",
    "Check",
    "CheckCode",
    "CheckData",
    "CheckFailure",
    "EnvFileFailure",
    "EnvFileNoKnobs",
    "KnobInFile",
    "KnobLive",
    "KnobLiveVsSpec",
    "KnobNotReadBack",
    "Layer",
    "LayerSkipped",
    "LiveProcess",
    "NoEnvFile",
    "RouterLaunch",
    "SkipReason",
]


class Layer(StrEnum):
    """The layers, in the order they are checked and shown."""

    CONFIG = "config"  # the file (env file, an argument's place) and the unit vs the spec
    LIVE = "live"  # the process's environment or command line, and the engine, vs the file
    PAIR = "pair"  # what each prefill/decode pair's engines report, against each other
    HEALTH = "health"  # the readiness endpoints
    E2E = "e2e"  # a streaming chat completion through the entry point


class CheckCode(StrEnum):
    """How a check ended (docs/verify.md has a row for each). Values are stored: do not change."""

    CONFIG_NO_ENV_FILE = "config.no_env_file"
    CONFIG_MISSING = "config.missing"
    CONFIG_UNREADABLE = "config.unreadable"
    CONFIG_ERROR = "config.error"
    CONFIG_NO_KNOBS = "config.no_knobs"
    CONFIG_MATCHES_SPEC = "config.matches_spec"
    CONFIG_NOT_PINNED = "config.not_pinned"
    CONFIG_PIN_MISMATCH = "config.pin_mismatch"  # fails
    CONFIG_ARGUMENT_MATCHES_SPEC = "config.argument_matches_spec"  # an argument knob's file layer
    CONFIG_ARGUMENT_NOT_PINNED = "config.argument_not_pinned"
    CONFIG_ARGUMENT_PIN_MISMATCH = "config.argument_pin_mismatch"  # fails
    CONFIG_ARGUMENT_DROPPED = "config.argument_dropped"  # fails: the engine drops the file's key
    CONFIG_UNIT_LOADED = "config.unit_loaded"  # systemd loaded the unit as it is on disk
    CONFIG_UNIT_STALE = "config.unit_stale"  # fails: changed on disk, not reloaded
    CONFIG_UNIT_UNKNOWN = "config.unit_unknown"  # fails: systemd did not say

    LIVE_ERROR = "live.error"
    LIVE_NO_PROCESS = "live.no_process"
    LIVE_NO_KNOBS = "live.no_knobs"
    LIVE_FILE_UNREADABLE = "live.env_file_unreadable"
    LIVE_MATCH = "live.match"  # the file-vs-live verdicts (LiveVerdict), one code each
    LIVE_UNSET = "live.unset"
    LIVE_RESTART_NEEDED = "live.restart_needed"
    LIVE_LOST_ON_RESTART = "live.lost_on_restart"
    LIVE_DIFFERS = "live.differs"
    #: a router's environment reads blank (sglang-router writes its title over it): the knob is
    #: not read back, neither a pass nor a failure (``skip``), never "restart needed"
    LIVE_NOT_READ_BACK = "live.not_read_back"
    LIVE_NO_ENV_FILE = "live.no_env_file"  # fails when the live value differs from the spec's pin
    LIVE_ARGUMENT_MATCH = "live.argument_match"  # an argument knob: file vs the process's argv
    LIVE_ARGUMENT_UNSET = "live.argument_unset"
    LIVE_ARGUMENT_RESTART_NEEDED = "live.argument_restart_needed"
    LIVE_ARGUMENT_LOST_ON_RESTART = "live.argument_lost_on_restart"
    LIVE_ARGUMENT_DIFFERS = "live.argument_differs"
    LIVE_ENGINE_DIFFERS = "live.engine_differs"  # fails: argv = file, the engine says otherwise
    LIVE_KNOB_UNREAD = "live.knob_unread"  # fails: the engine's release does not read the knob
    LIVE_READS_UNKNOWN = "live.reads_unknown"  # fails: no list of what the release reads
    LIVE_ROUTER_AS_SPEC = "live.router_as_spec"  # the router was launched as the spec says now
    LIVE_ROUTER_RESTART_NEEDED = "live.router_restart_needed"  # fails: its settings changed

    PAIR_ERROR = "pair.error"
    PAIR_MATCH = "pair.match"  # every field of the hand-off agrees
    PAIR_MISMATCH = "pair.mismatch"  # fails: a field the hand-off needs disagrees
    PAIR_UNKNOWN = "pair.unknown"  # fails: a field is not reported by a side (never a pass)

    HEALTH_ERROR = "health.error"
    HEALTH_UNREACHABLE = "health.unreachable"
    HEALTH_HTTP_ERROR = "health.http_error"
    HEALTH_READY = "health.ready"
    HEALTH_WORKER_READY = "health.worker_ready"  # its own health never exercises the KV transfer
    HEALTH_WORKERS_MISSING = "health.workers_missing"  # the router does not list some workers
    HEALTH_WORKERS_MISREGISTERED = "health.workers_misregistered"  # wrong role or bootstrap port
    HEALTH_WORKERS_UNKNOWN = "health.workers_unknown"  # the router lists a worker the spec lacks
    HEALTH_WORKERS_UNREADABLE = "health.workers_unreadable"  # its worker list: another shape
    HEALTH_BOOTSTRAP_MISMATCH = "health.bootstrap_mismatch"  # a prefill listens on another port

    E2E_ERROR = "e2e.error"
    E2E_FAILED = "e2e.failed"
    E2E_SECOND_FAILED = "e2e.second_failed"
    E2E_LONG_FAILED = "e2e.long_failed"  # the long prompt (sized from the engines' limit) failed
    E2E_PASSED = "e2e.passed"
    E2E_WORKER_REACHED = "e2e.worker_reached"  # xPyD: one per prefill and decode worker
    E2E_WORKER_UNREACHED = "e2e.worker_unreached"
    E2E_WORKER_UNCOUNTED = "e2e.worker_uncounted"  # no real counter of its requests: unknown, fails
    E2E_SKIPPED = "e2e.skipped"  # nothing to send it through (no router, no proxy): not a failure
    E2E_ANSWERS_SAME = "e2e.answers_same"  # greedy probes answered as their references
    E2E_ANSWERS_REFERENCES_TAKEN = "e2e.answers_references_taken"  # none stored: these became them
    E2E_ANSWERS_UNREFERENCED = "e2e.answers_unreferenced"  # no ledger: checks without a reference
    E2E_ANSWERS_CHANGED = "e2e.answers_changed"  # fails: an answer wrong or changed (and where)

    @property
    def layer(self) -> Layer:
        return Layer(self.value.partition(".")[0])

    @classmethod
    def error_of(cls, layer: Layer) -> CheckCode:
        """``LAYER.error``: an error stopped the layer's check."""
        return cls(f"{layer.value}.error")

    @classmethod
    def of_verdict(cls, verdict: LiveVerdict) -> CheckCode:
        """The code of a file-vs-live verdict (``live.VERDICT``)."""
        return cls(f"live.{verdict.value}")

    @classmethod
    def of_argument(cls, verdict: ArgumentVerdict) -> CheckCode:
        """The code of an argument knob's live check (``live.argument_VERDICT``, or
        ``live.engine_differs``)."""
        if verdict.engine_differs:
            return cls.LIVE_ENGINE_DIFFERS
        return cls(f"live.argument_{verdict.verdict.value}")


# -- the data, one type per kind of fact ---------------------------------------------------------


@dataclass(frozen=True)
class CheckFailure:
    """``LAYER.error``: what stopped the layer's check (``error``: the exception, named)."""

    error: str


class SkipReason(StrEnum):
    """Why a layer was not checked (stored: values unchanged)."""

    NO_ENTRY_POINT = "no_entry_point"  # the spec has no router or proxy to send a request through


@dataclass(frozen=True)
class LayerSkipped:
    """``e2e.skipped``: the layer was not checked, and why (neither a pass nor a failure: the
    verdict rests on the other layers)."""

    reason: SkipReason


@dataclass(frozen=True)
class NoEnvFile:
    """``config.no_env_file``: the spec names no env file; ``knobs``: the service declares some."""

    knobs: bool


@dataclass(frozen=True)
class EnvFileFailure:
    """``config.missing`` (no ``error``), ``config.unreadable`` (the parser's message) and
    ``config.error`` (the host's): the env file could not be read as one."""

    env_file: str | None
    error: str | None = None


@dataclass(frozen=True)
class EnvFileNoKnobs:
    """``config.no_knobs``: the env file parses and sets no declared knob."""

    env_file: str


@dataclass(frozen=True)
class KnobInFile:
    """``config.matches_spec``, ``config.not_pinned``, ``config.pin_mismatch``: the knob's value in
    the env file (``file``), the spec's pin (``spec``), its value in the file's latest backup that
    differs (``backup``, ``backup_path``), and the ledger's last recorded change of it
    (``recorded``: the value it set; ``recorded_change_id``)."""

    _masked = masked_serializer("knob", "file", "spec", "backup", "recorded")

    knob: str
    file: str | None
    spec: str | None
    backup: str | None
    backup_path: str | None
    env_file: str
    recorded: Omitted[str] = None
    recorded_change_id: Omitted[int] = None


@dataclass(frozen=True)
class LiveProcess:
    """``live.no_process`` (``pid`` None), ``live.no_knobs``, ``live.env_file_unreadable``: the
    process that serves the service and where its pid came from (``pid_source``)."""

    pid: int | None
    pid_source: str


@dataclass(frozen=True)
class KnobLive:
    """``live.match`` … ``live.differs``: the knob in the env file (``file``) and in the process's
    environment (``live``), and the verdict of the two. ``launched``: the process (a router)
    wrote over its environment, so ``live`` is the value in the copy of the env file servelab
    kept when it launched it (its pid record's ``env_at_launch``), which is what it runs with."""

    _masked = masked_serializer("knob", "file", "live")

    pid: int
    pid_source: str
    knob: str
    file: str | None
    live: str | None
    verdict: LiveVerdict
    #: True: read from the launch copy; None (left out of the row: every stored row before it
    #: had no such key): from the process's environment
    launched: Omitted[bool] = None


@dataclass(frozen=True)
class KnobNotReadBack:
    """``live.not_read_back``: the router's environment reads blank (its process wrote over it),
    so the knob (``file``: its env file's value; None: unset there, or no env file) cannot be
    read back from it."""

    _masked = masked_serializer("knob", "file")

    pid: int
    pid_source: str
    knob: str
    file: str | None


@dataclass(frozen=True)
class KnobLiveVsSpec:
    """``live.no_env_file``: no env file to compare with, so the live value against the spec's pin
    (``file`` is always None)."""

    _masked = masked_serializer("knob", "live", "spec")

    pid: int
    pid_source: str
    knob: str
    live: str | None
    spec: str | None
    file: None = None


@dataclass(frozen=True)
class RouterLaunch:
    """``live.router_as_spec``, ``live.router_restart_needed``: a router servelab launched (its
    ``pid``, from its pid record) and each setting the command line the spec would launch now
    gives otherwise than the one it was launched with (:mod:`servelab.core.deploy.relaunch`;
    none: it runs as the spec says)."""

    pid: int
    changes: tuple[SettingChange, ...] = ()


CheckData = (
    CheckFailure | NoEnvFile | EnvFileFailure | EnvFileNoKnobs | KnobInFile | LiveProcess
    | KnobLive | KnobLiveVsSpec | KnobNotReadBack | HealthProbe | E2EProbe | WorkerReach
    | ArgumentInFile | UnitState | ArgumentLive | PairReport | UnreadKnob | ArgumentDropped
    | LayerSkipped | AnswerProbes | RouterLaunch
)  # fmt: skip

_C = CheckCode
#: The kind of data each code carries.
DATA_OF: Mapping[CheckCode, type[CheckData]] = {
    _C.CONFIG_NO_ENV_FILE: NoEnvFile,
    _C.CONFIG_MISSING: EnvFileFailure,
    _C.CONFIG_UNREADABLE: EnvFileFailure,
    _C.CONFIG_ERROR: EnvFileFailure,
    _C.CONFIG_NO_KNOBS: EnvFileNoKnobs,
    **dict.fromkeys((_C.CONFIG_MATCHES_SPEC, _C.CONFIG_NOT_PINNED, _C.CONFIG_PIN_MISMATCH),
                    KnobInFile),
    **dict.fromkeys((_C.CONFIG_ARGUMENT_MATCHES_SPEC, _C.CONFIG_ARGUMENT_NOT_PINNED,
                     _C.CONFIG_ARGUMENT_PIN_MISMATCH), ArgumentInFile),
    **dict.fromkeys((_C.CONFIG_UNIT_LOADED, _C.CONFIG_UNIT_STALE, _C.CONFIG_UNIT_UNKNOWN),
                    UnitState),
    _C.CONFIG_ARGUMENT_DROPPED: ArgumentDropped,
    **dict.fromkeys((*(_C(f"live.argument_{v.value}") for v in LiveVerdict),
                     _C.LIVE_ENGINE_DIFFERS), ArgumentLive),
    **dict.fromkeys((_C.LIVE_ERROR, _C.PAIR_ERROR, _C.HEALTH_ERROR, _C.E2E_ERROR), CheckFailure),
    **dict.fromkeys((_C.PAIR_MATCH, _C.PAIR_MISMATCH, _C.PAIR_UNKNOWN), PairReport),
    **dict.fromkeys((_C.LIVE_KNOB_UNREAD, _C.LIVE_READS_UNKNOWN), UnreadKnob),
    **dict.fromkeys((_C.LIVE_NO_PROCESS, _C.LIVE_NO_KNOBS, _C.LIVE_FILE_UNREADABLE), LiveProcess),
    **dict.fromkeys(map(_C.of_verdict, LiveVerdict), KnobLive),
    _C.LIVE_NO_ENV_FILE: KnobLiveVsSpec,
    _C.LIVE_NOT_READ_BACK: KnobNotReadBack,
    **dict.fromkeys((_C.LIVE_ROUTER_AS_SPEC, _C.LIVE_ROUTER_RESTART_NEEDED), RouterLaunch),
    **dict.fromkeys((_C.HEALTH_UNREACHABLE, _C.HEALTH_HTTP_ERROR, _C.HEALTH_READY,
                     _C.HEALTH_WORKER_READY, _C.HEALTH_WORKERS_MISSING,
                     _C.HEALTH_WORKERS_MISREGISTERED, _C.HEALTH_WORKERS_UNKNOWN,
                     _C.HEALTH_WORKERS_UNREADABLE, _C.HEALTH_BOOTSTRAP_MISMATCH), HealthProbe),
    **dict.fromkeys((_C.E2E_FAILED, _C.E2E_SECOND_FAILED, _C.E2E_LONG_FAILED, _C.E2E_PASSED),
                   E2EProbe),
    **dict.fromkeys((_C.E2E_WORKER_REACHED, _C.E2E_WORKER_UNREACHED, _C.E2E_WORKER_UNCOUNTED),
                    WorkerReach),
    _C.E2E_SKIPPED: LayerSkipped,
    **dict.fromkeys((_C.E2E_ANSWERS_SAME, _C.E2E_ANSWERS_REFERENCES_TAKEN,
                     _C.E2E_ANSWERS_UNREFERENCED, _C.E2E_ANSWERS_CHANGED), AnswerProbes),
}  # fmt: skip


# -- a check ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One verified fact: the service it is about, pass/fail, its code and its data (of the kind
    :data:`DATA_OF` pairs with the code)."""

    service: str
    ok: bool
    code: CheckCode
    data: CheckData

    def __post_init__(self) -> None:
        kind = DATA_OF[self.code]
        if not isinstance(self.data, kind):
            raise TypeError(f"{self.code} carries {kind.__name__}, not {type(self.data).__name__}")

    @property
    def layer(self) -> Layer:
        return self.code.layer

    @property
    def knob(self) -> str | None:
        """The knob the check is about, if any."""
        match self.data:
            case (
                KnobInFile(knob=knob) | KnobLive(knob=knob) | KnobLiveVsSpec(knob=knob)
                | KnobNotReadBack(knob=knob)
                | ArgumentInFile(knob=knob) | ArgumentLive(knob=knob) | UnreadKnob(knob=knob)
                | ArgumentDropped(knob=knob)
            ):  # fmt: skip
                return knob
        return None

    @property
    def live(self) -> str | None:
        """The knob's value in the process (environment or command line), for a live check."""
        match self.data:
            case KnobLive(live=live) | KnobLiveVsSpec(live=live) | ArgumentLive(live=live):
                return live
        return None
