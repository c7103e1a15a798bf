"""The planner of ``servelab investigate``: the suspects, where a layer sits, and what to do next
given what is decided (pure).

The loop is reproduce → localize → suspects → decide → resolve. :func:`next_action` reads the
state (:class:`~servelab.core.investigate.state.InvestigationState`) and names one action; the
runner (:mod:`servelab.ops.investigate.run`) does it with the existing commands' ops functions
and records the new state on the case, so a stopped investigation goes on where it stopped.

**Deciding, cheapest first.** A failure localized in front of the router (a proxy) is tested first
by the differential (the failing workload through it and straight to the router: ``case test`` of
the component, nothing restarted); then each recorded engine change is tested only as far as needed
to clear it (one ``case test`` each). A failure inside (the router, the engines, the answers) is
decided over the recorded changes: one change by ``case test``, several by ``case bisect`` (delta
debugging, each probe an experiment), once the failing soak with every change at its good value
passed (ddmin assumes it: a failure that state shows too is explained by no change, and none is
bisected or convicted). A slowdown (``--symptom slow``) tests each recorded change by an A/B
of its two values (:class:`SlowTest`). Every verdict is an experiment's, never the order of the
changes; a change no experiment decided stays inconclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from servelab.core.ab.record import AbRunRecord
from servelab.core.case.revert import revert_cost
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    Stage,
    SuspectChange,
    Symptom,
)
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.telemetry.layers import Layer

__all__ = [
    "CASE_REASON",
    "OUTSIDE_LAYERS",
    "Action",
    "Bisect",
    "ComponentTest",
    "Finish",
    "GoodState",
    "KnobTest",
    "ListSuspects",
    "Localize",
    "Reproduce",
    "Resolve",
    "SlowTest",
    "after_decide",
    "next_action",
    "record_decided",
    "side_of",
    "suspects_since",
]

#: How the reasons of the knob changes a case's commands make begin (``case 3: test of …``,
#: ``case bisect: left as found``): never an operator's change.
CASE_REASON = "case "

#: The layers in front of the router: a proxy (or the client) is bypassed, never bisected.
OUTSIDE_LAYERS = frozenset({Layer.CLIENT_PROXY, Layer.CLIENT})


@dataclass(frozen=True)
class Reproduce:
    """Run the symptom's test (a soak for a hang, the answer checks for answers)."""


@dataclass(frozen=True)
class Localize:
    """Name the layer: the soak's localization (the replay matrix, telemetry) and verify's
    layers (knobs, the P/D pair)."""


@dataclass(frozen=True)
class ListSuspects:
    """The knobs changed since the last good point, with what each bought."""


@dataclass(frozen=True)
class ComponentTest:
    """``case test component:NAME``: the failing workload through it and bypassing it."""

    target: str


@dataclass(frozen=True)
class KnobTest:
    """``case test knob:SERVICE/NAME``: the failing test with the change and without it."""

    suspect: SuspectChange


@dataclass(frozen=True)
class SlowTest:
    """``--symptom slow``: an A/B of the change's suspected value against its good value on the
    baseline's workload; guilty when reverting it restores throughput by the A/B rule
    (:mod:`servelab.core.case.abtest`)."""

    suspect: SuspectChange


@dataclass(frozen=True)
class GoodState:
    """Before a bisection: the failing soak with every change at its good value. ddmin assumes
    that state good; failing too, no change explains the failure and none is bisected."""

    suspects: tuple[SuspectChange, ...]


@dataclass(frozen=True)
class Bisect:
    """``case bisect`` over the changes: which of them make it fail."""

    suspects: tuple[SuspectChange, ...]


@dataclass(frozen=True)
class Resolve:
    """Revert what was convicted and is still live, resolve the case with the experiments'
    verdicts, carry out its restore plan (each exonerated revert restored, proven live)."""


@dataclass(frozen=True)
class Finish:
    """Nothing left to do: the investigation ended this way."""

    ending: Ending


Action = (
    Reproduce | Localize | ListSuspects | ComponentTest | KnobTest | SlowTest | GoodState | Bisect
    | Resolve | Finish
)  # fmt: skip


def side_of(layer: str | None, *, component: str | None) -> Side:
    """Outside when the layer is the client/proxy and there is a component in front of the
    router to bypass; inside otherwise (the router, the engines, the answers, or unknown)."""
    if layer in OUTSIDE_LAYERS and component is not None:
        return Side.OUTSIDE
    return Side.INSIDE


def suspects_since(
    changes: Sequence[KnobChangeRecord],
    *,
    since_at: str | None,
    upto_id: int,
    ab_runs: Sequence[AbRunRecord] = (),
) -> tuple[SuspectChange, ...]:
    """Every knob an operator changed after ``since_at`` (None: ever) up to change ``upto_id``,
    in the order of its first change: its value at the point, the newest value an operator set,
    its value now; what reverting it costs by the newest A/B of both values."""
    window = sorted(
        (c for c in changes if c.id <= upto_id and (since_at is None or c.at > since_at)),
        key=lambda c: c.id,
    )
    keys: list[tuple[str, str]] = []
    for change in window:
        if (change.service, change.name) not in keys:
            keys.append((change.service, change.name))
    out = [_suspect(key, window, ab_runs) for key in keys]
    return tuple(s for s in out if s is not None)


def _suspect(
    key: tuple[str, str], window: Sequence[KnobChangeRecord], ab_runs: Sequence[AbRunRecord]
) -> SuspectChange | None:
    mine = [c for c in window if (c.service, c.name) == key]
    by_operator = [c for c in mine if _by_operator(c)]
    if not by_operator:
        return None  # only a case's reverts, restores and experiments moved it
    good, suspected, current = mine[0].old, by_operator[-1].new, mine[-1].new
    if suspected == good:
        return None  # changed and changed back: nothing to suspect
    cost = revert_cost(ab_runs, key[0], key[1], suspected, good)
    return SuspectChange(
        key[0], key[1], good, suspected, current, tuple(c.id for c in mine),
        reverted=current == good, ab_id=cost.ab_id, bought=cost.points,
    )  # fmt: skip


def _by_operator(change: KnobChangeRecord) -> bool:
    """A change an operator made: not under a case (a revert, a restore) nor by a case's
    experiment (``case test``'s and ``case bisect``'s arms, their reasons ``case …``)."""
    return change.case_id is None and not (change.reason or "").startswith(CASE_REASON)


def next_action(state: InvestigationState) -> Action:
    """What to do next, given what is decided."""
    match state.stage:
        case Stage.REPRODUCE:
            return Reproduce()
        case Stage.LOCALIZE:
            return Localize()
        case Stage.SUSPECTS:
            return ListSuspects()
        case Stage.DECIDE:
            return _decide(state) or Resolve()
        case Stage.RESOLVE:
            return Resolve()
        case Stage.DONE:
            return Finish(state.ending or Ending.UNEXPLAINED)


def _decide(state: InvestigationState) -> Action | None:
    """The cheapest experiment still to run (None: everything is decided)."""
    component = f"component:{state.component}" if state.component else None
    if state.side is Side.OUTSIDE and component and state.outcome_of(component) is None:
        return ComponentTest(component)
    open_ = [s for s in state.suspects if state.outcome_of(s.target) is None]
    if not open_:
        return None
    if state.symptom is Symptom.SLOW:
        return SlowTest(open_[0])  # each change by its own A/B: a slowdown may add up
    proxy_guilty = component is not None and state.outcome_of(component) == "convicted"
    if proxy_guilty or len(state.suspects) == 1:
        return KnobTest(open_[0])
    if state.symptom is Symptom.HANG and state.good_fails is None:
        return GoodState(tuple(open_))
    if state.bisect_id is None and not state.good_fails:
        return Bisect(tuple(open_))
    return None


def record_decided(state: InvestigationState, decided: Sequence[Decided]) -> InvestigationState:
    """The state with ``decided`` added (a target decided again: the newest verdict counts)."""
    return replace(state, decided=(*state.decided, *decided))


def after_decide(state: InvestigationState) -> InvestigationState:
    """The state once nothing is left to decide: resolve next, and how it ends."""
    ending = Ending.RESOLVED if state.convicted else Ending.UNEXPLAINED
    return replace(state, stage=Stage.RESOLVE, ending=ending)
