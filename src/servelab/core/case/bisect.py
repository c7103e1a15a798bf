"""The planner of ``case bisect``: which changes turn a good state bad, by delta debugging (pure).

Between a state known good and one known bad lie ``n`` changes (each a knob of a service from
one value to another: an env variable, a server argument or a config key alike). A **probe**
applies a subset of them on top of the good state and runs the test that tells good from bad (an
experiment decided elsewhere, :mod:`servelab.core.case.experiment`); its outcome is ``good``,
``bad`` or ``undecided``. The planner says which subset to probe next and, at the end, which
changes are guilty.

**The algorithm** is ``ddmin`` (Zeller & Hildebrandt 2002, "Simplifying and isolating
failure-inducing input", IEEE Trans. Software Eng. 28(2), 183–200). With the changes still
suspected (at first all of them, bad by assumption) split into ``g`` parts (``g = 2`` at first):

1. if a part alone is bad, suspect only it, ``g = 2`` ("reduce to subset");
2. else (``g > 2``) if everything but a part is bad, suspect that, ``g = max(g − 1, 2)``
   ("reduce to complement");
3. else if the parts are single changes, stop; else ``g = min(2g, size)`` and split finer.

The result is **1-minimal**: bad, and good without any one of its changes. When the failure
needs one set of changes together (a single change, or two guilty only together) and adding
others neither causes nor cures it, that is exactly the set; when several sets cause it each on
its own, it is one of them. A pair guilty only together is found as the pair: when the split
parts it, no part alone is bad but a complement holding both is (step 2). No subset is probed
twice. Six changes with one guilty take at most 5 probes of ddmin (trying each alone takes 6).

**The good and the bad state first** (issue 38): before ddmin, the first probe applies no change
(the empty set: the good state), against the bad state (every change: the arm of every probe).
Only when it is ``good`` — the bad state failed, and significantly more than the good one — does
ddmin run; else nothing is guilty and the result says why (``good_state``): ``bad``, the good
state fails like the bad one (not these changes); ``undecided``, the failure was not shown to
come with the changes (the bad state did not fail, or not clearly more). A conviction thus always
rests on the bad state seen failing and, a single change, the state without it seen passing.

**An undecided probe** is ddmin's "unresolved" outcome: it reduces nothing, and the search goes
on with the next part or complement (it is not repeated: the experiment behind it already spent
its rounds). The set found is still bad (every reduction rested on a bad probe); a change whose
removal was probed undecided is named ``unproven`` and the result is then not shown minimal.

The state is the changes and the probes so far: :func:`next_step` replays the algorithm against
the probes' outcomes, so a stored state (:mod:`servelab.core.ledger.codec`) resumes where it
stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from servelab.core.redacted import masked_serializer

__all__ = [
    "METHOD",
    "BisectState",
    "Bisected",
    "Change",
    "NextProbe",
    "Probe",
    "ProbeOutcome",
    "Step",
    "next_step",
    "record_probe",
    "start_bisect",
]

METHOD = "delta debugging, ddmin (Zeller & Hildebrandt 2002)"


class ProbeOutcome(StrEnum):
    """What the test said of a probe."""

    GOOD = "good"
    BAD = "bad"
    UNDECIDED = "undecided"


@dataclass(frozen=True, slots=True)
class Change:
    """One change from the good state to the bad one: ``knob`` of ``service`` from ``good`` to
    ``bad`` (None: unset). Encoded (the ledger, ``--json``, ``ledger export``) with ``good`` and
    ``bad`` masked by the redaction policy (a secret-looking knob's values: ``***``); the
    bisection in progress sets the real ones."""

    _masked = masked_serializer("knob", "good", "bad")

    service: str
    knob: str
    good: str | None
    bad: str | None


@dataclass(frozen=True, slots=True)
class Probe:
    """A probe done: the changes it applied (indices into the state's changes, ascending) and
    its outcome."""

    changes: tuple[int, ...]
    outcome: ProbeOutcome


@dataclass(frozen=True, slots=True)
class BisectState:
    """The changes between good and bad, and every probe done so far, in order."""

    changes: tuple[Change, ...]
    probes: tuple[Probe, ...] = ()


@dataclass(frozen=True, slots=True)
class NextProbe:
    """The probe to run next: apply ``changes`` (indices ``indices``) on top of the good state."""

    indices: tuple[int, ...]
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class Bisected:
    """The guilty changes (indices, and the changes), whether they are shown 1-minimal, the
    guilty changes whose removal was probed undecided, what it took, and the good state's
    outcome against the bad one (not ``good``: nothing guilty; a result recorded before the good
    state was probed reads ``good``, as it was assumed then)."""

    indices: tuple[int, ...]
    changes: tuple[Change, ...]
    minimal: bool
    unproven: tuple[int, ...]
    probes: int
    undecided: int
    method: str = METHOD
    good_state: ProbeOutcome = ProbeOutcome.GOOD


Step = NextProbe | Bisected


def start_bisect(changes: Sequence[Change]) -> BisectState:
    """A bisection over one or more distinct ``changes`` with no probe done."""
    if not changes or len(set(changes)) != len(changes):
        raise ValueError("a bisection needs one or more distinct changes")
    return BisectState(tuple(changes))


def _split(items: tuple[int, ...], parts: int) -> list[tuple[int, ...]]:
    """``items`` in ``parts`` consecutive parts whose sizes differ by at most one, the larger
    first (three split as two and one: a single guilty change among six then takes at most 5
    probes, against 6 with the smaller part first)."""
    n = len(items)
    return [items[-(-i * n // parts) : -(-(i + 1) * n // parts)] for i in range(parts)]


def _known(state: BisectState) -> dict[frozenset[int], ProbeOutcome]:
    known = {frozenset(p.changes): p.outcome for p in state.probes}
    known[frozenset(range(len(state.changes)))] = ProbeOutcome.BAD  # every probe's other arm
    return known


def _ddmin(n: int, known: Mapping[frozenset[int], ProbeOutcome]) -> tuple[tuple[int, ...], bool]:
    """Replay ddmin over ``n`` changes against the outcomes ``known``: ``(subset, False)`` when
    it needs the outcome of ``subset``, ``(guilty, True)`` when it is done."""
    current, granularity = tuple(range(n)), 2
    while len(current) > 1:
        parts = _split(current, min(granularity, len(current)))
        candidates = [(part, 2) for part in parts]
        if len(parts) > 2:
            candidates += [(tuple(c for c in current if c not in part), len(parts) - 1)
                           for part in parts]  # fmt: skip
        reduced = None
        for subset, next_granularity in candidates:
            outcome = known.get(frozenset(subset))
            if outcome is None:
                return subset, False
            if outcome is ProbeOutcome.BAD:
                reduced = subset, next_granularity
                break
        if reduced is not None:
            current, granularity = reduced
        elif len(parts) == len(current):
            break
        else:
            granularity = min(len(current), 2 * len(parts))
    return current, True


def next_step(state: BisectState) -> Step:
    """The next probe to run, or the result when the search is done."""
    known = _known(state)
    good_state = known.get(frozenset())
    if good_state is None:
        return NextProbe((), ())  # the good state against the bad one, before anything else
    undecided = sum(p.outcome is ProbeOutcome.UNDECIDED for p in state.probes)
    if good_state is not ProbeOutcome.GOOD:
        return Bisected((), (), False, (), len(state.probes), undecided, good_state=good_state)
    subset, done = _ddmin(len(state.changes), known)
    picked = tuple(state.changes[i] for i in subset)
    if not done:
        return NextProbe(subset, picked)
    unproven = tuple(c for c in subset if known[frozenset(subset) - {c}] is not ProbeOutcome.GOOD)
    return Bisected(subset, picked, not unproven, unproven, len(state.probes), undecided)


def record_probe(state: BisectState, outcome: ProbeOutcome) -> BisectState:
    """The state after the probe :func:`next_step` asked for gave ``outcome``."""
    step = next_step(state)
    if isinstance(step, Bisected):
        raise ValueError("the bisection is done: no probe is pending")
    return replace(state, probes=(*state.probes, Probe(step.indices, outcome)))
