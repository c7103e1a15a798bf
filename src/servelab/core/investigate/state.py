"""An investigation's resumable state, stored on its case (pure; encoded by the one codec).

``servelab investigate`` runs the evidence loop of the reference incident: reproduce the symptom,
localize it, list the suspects (the layer localized and every knob changed since the last good
point), decide each by experiment (cheapest first), resolve the case and write the report. After
each stage the whole state is recorded as the case event ``investigate`` (:data:`KIND`); the newest
one is where ``--resume`` goes on (:func:`servelab.core.investigate.plan.next_action`).

Codes only: the words are :mod:`servelab.report.investigate`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, ClassVar

from servelab.core.case.record import CaseEvent
from servelab.core.case.revert import ConcurrencyCost
from servelab.core.investigate.slow import Slowdown, SmallBaseline
from servelab.core.ledger.codec import OMITTED_IF_NONE, decode

__all__ = [
    "Decided",
    "Ending",
    "InvestigationState",
    "Side",
    "Stage",
    "SuspectChange",
    "Symptom",
    "read_state",
]


class Symptom(StrEnum):
    """What the operator saw: sessions hang, it got slower, or the answers changed."""

    HANG = "hang"
    SLOW = "slow"
    ANSWERS = "answers"


class Stage(StrEnum):
    """Where the loop stands: the next stage to run (``done``: nothing left)."""

    REPRODUCE = "reproduce"
    LOCALIZE = "localize"
    SUSPECTS = "suspects"
    DECIDE = "decide"
    RESOLVE = "resolve"
    DONE = "done"


class Side(StrEnum):
    """Where the localized layer sits: in front of the router (a proxy: bypassed by experiment)
    or inside the serving path (the router, the engines: decided over the recorded changes)."""

    OUTSIDE = "outside"
    INSIDE = "inside"


class Ending(StrEnum):
    """How an investigation ended."""

    RESOLVED = "resolved"  # the case resolved with the experiments' verdicts
    NOT_REPRODUCED = "not_reproduced"  # the symptom's test passed: nothing to chase
    UNEXPLAINED = "unexplained"  # reproduced and localized, but no suspect was convicted
    NO_BASELINE = "no_baseline"  # --symptom slow with no usable recorded bench to compare against
    INCONCLUSIVE = "inconclusive"  # --symptom slow: the comparison with the baseline undecided


@dataclass(frozen=True)
class SuspectChange:
    """A knob changed since the last good point: from ``good`` (its value there) to ``suspected``
    (the newest value an operator set, outside any case), ``current`` its value when the
    investigation began (a revert on suspicion makes it ``good`` again: ``reverted``); the A/B that
    measured it (``ab_id``) and what it bought (each point the change against its ``good`` value:
    positive is a gain)."""

    service: str
    knob: str
    good: str | None
    suspected: str | None
    current: str | None
    change_ids: tuple[int, ...] = ()
    reverted: bool = False
    ab_id: int | None = None
    bought: tuple[ConcurrencyCost, ...] = ()

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.knob}"


@dataclass(frozen=True)
class Decided:
    """A verdict the evidence gave: ``target``'s ``outcome`` (convicted, exonerated,
    inconclusive), ``by`` which experiment (``case test``: its event; ``bisect``: its conclusion's
    event), recorded on the case as evidence ``evidence_id``."""

    target: str
    outcome: str
    by: str
    event_id: int | None = None
    evidence_id: int | None = None
    p_value: float | None = None


@dataclass(frozen=True)
class InvestigationState:
    """Everything decided so far; ``stage`` is the next one to run.

    ``upto_change_id``: the newest knob change recorded when the investigation began (later ones
    are its own experiments' and never suspects); ``since`` the last good point (``verify:ID``) and
    ``since_at`` its time; ``reproduced`` by soak ``soak_id`` (a hang) or bench runs ``run_ids``;
    ``layer`` and ``worker`` what the localization named (a :class:`~servelab.core.telemetry.layers
    .Layer` value), ``side`` where it sits, ``component`` the service in front of the router to
    bypass; ``verification_id`` verify's layers at localization; ``bisect_id`` a bisection begun;
    ``reverted`` the convicted knobs reverted by the investigation; ``restored`` whether the
    restore plan was carried out (None: nothing to restore); ``slowdown`` a slowness's
    reproduction against its baseline."""

    KIND: ClassVar[str] = "investigate"

    case_id: int
    symptom: Symptom
    upto_change_id: int = 0
    since: str | None = None
    since_at: str | None = None
    stage: Stage = Stage.REPRODUCE
    reproduced: bool | None = None
    soak_id: int | None = None
    run_ids: tuple[int, ...] = ()
    layer: str | None = None
    worker: str | None = None
    side: Side | None = None
    component: str | None = None
    verification_id: int | None = None
    suspects: tuple[SuspectChange, ...] = ()
    decided: tuple[Decided, ...] = ()
    #: the good state's soak before a bisection (every change at its good value): its id, and
    #: whether it failed too (then no change explains the failure and none is bisected)
    good_soak_id: int | None = None
    good_fails: bool | None = None
    bisect_id: int | None = None
    reverted: tuple[str, ...] = ()
    restored: bool | None = None
    restore_verification_id: int | None = None
    ending: Ending | None = None
    elapsed_s: float = 0.0
    #: ``--symptom slow``: the reproduction against the last recorded baseline
    slowdown: Annotated[Slowdown | None, OMITTED_IF_NONE] = None
    #: ``--symptom slow`` with no usable baseline: the recorded ones too small to compare with
    small_baselines: Annotated[tuple[SmallBaseline, ...] | None, OMITTED_IF_NONE] = None

    def outcome_of(self, target: str) -> str | None:
        """The newest verdict on ``target`` (None: not decided yet)."""
        found = [d.outcome for d in self.decided if d.target == target]
        return found[-1] if found else None

    @property
    def convicted(self) -> tuple[str, ...]:
        return tuple(d.target for d in self.decided if d.outcome == "convicted")

    @property
    def exonerated(self) -> tuple[str, ...]:
        return tuple(d.target for d in self.decided if d.outcome == "exonerated")


def read_state(event: CaseEvent) -> InvestigationState:
    """A recorded ``investigate`` case event, read back as its state (the codec's reader: a
    field an older event's detail lacks reads as its default)."""
    if event.kind != InvestigationState.KIND:
        raise ValueError(f"case event {event.id} is {event.kind!r}, not an investigation")
    return decode(InvestigationState, event.detail)
