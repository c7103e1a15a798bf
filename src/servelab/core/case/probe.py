"""A bisection's probes and records (pure): the test, the probe's experiment and its rule, what a
bisection stores on its case, and the verdicts it supports.

**The test** tells good from bad: ``soak`` (the case's failing soak replayed: a session fails when
it stalls, errs or does not finish its rounds, as ``case test`` counts it), a bench threshold,
``throughput@C64<3000`` (a bench run at C64 through the router fails when its output tok/s is
below 3000; ``>`` fails above), or ``answers`` (``answers@C64``: bench runs at C64 carrying the
greedy answer probes, :mod:`servelab.core.answers`; a probe fails when its answer is wrong
against the references taken from the good state). A visit yields units (sessions, runs, or
probe answers) and how many failed.

**A probe** applies a subset of the changes on top of the good state (which subset:
:mod:`servelab.core.case.bisect`). It is a controlled experiment: arm ``probe`` (the subset
applied) against arm ``bad`` (every change applied), each visit set, co-restarted and proven
live, in ABBA order, one round (a visit of each) at a time. After each round the two arms'
failures are compared as ``case test`` compares them
(:func:`servelab.core.case.experiment.decide`: Fisher's exact test, Newcombe's interval), the
bad state as the suspect and the probe as its revert, at ``alpha / R`` for at most ``R`` rounds
(Bonferroni over the looks: the probe's error stays within ``alpha`` however many it takes):

- **good** when the probe fails significantly less than the bad state (the changes it leaves out
  cure it: the test's ``convicted``);
- **bad** when the interval on ``rate(bad) − rate(probe)`` lies below the meaningful effect ``δ``
  and the probe failed too (the probe fails like the bad state: ``exonerated``; a probe that
  never failed against a bad state that seldom did is not bad: it goes on to the next round);
- after ``R`` rounds without either, **undecided** (also when the bad state never failed: the
  failure did not reproduce).

**The records** (case events, through the codec; each probe also a piece of evidence):
``bisect`` when a bisection starts (:class:`BisectRecord`: the changes, the test, the points, the
rule), ``probe`` when each probe ends (:class:`ProbeRecord`), ``bisected`` at the end
(:class:`BisectConclusion`: the guilty changes). A bisection without its ``bisected`` is unfinished:
``case bisect --resume`` replays its probes and goes on.

**Verdicts** (:func:`bisect_verdicts`): a guilty change shown 1-minimal (its removal probed good)
is ``convicted``; a change outside the guilty set is ``exonerated``: the guilty set alone, without
it, was probed bad, so reverting it does not cure the failure (adding changes to a bad set is
assumed to keep it bad, as ddmin assumes). A guilty change whose removal was undecided gets none.
None at all when the good state's probe (the first) was not good: the bisection did not show
the failure coming with the changes (:mod:`servelab.core.case.bisect`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, SerializerFunctionWrapHandler, WrapSerializer

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import Bisected, Change, ProbeOutcome
from servelab.core.case.experiment import (
    ALPHA,
    CONVICTED,
    EFFECT,
    EXONERATED,
    ArmTally,
    Decision,
    decide,
)
from servelab.core.case.model import Target
from servelab.core.case.reached import LoadCheck, ReachedLoad
from servelab.core.ledger.codec import OMITTED_IF_NONE, Omitted
from servelab.core.load.workload import MAX_REQUESTS
from servelab.errors import CaseError

__all__ = [
    "ANSWERS_LEVEL",
    "ARM_BAD",
    "ARM_PROBE",
    "TEST_FORM",
    "BisectConclusion",
    "BisectRecord",
    "ProbeRecord",
    "ProbeTest",
    "ProbeTestKind",
    "ProbeVisit",
    "bisect_verdicts",
    "change_target",
    "judge_probe",
    "parse_probe_test",
    "round_order",
]

ARM_BAD = "bad"
ARM_PROBE = "probe"
TEST_FORM = "soak, answers[@C<LEVEL>], or METRIC@C<LEVEL><|>VALUE (throughput@C64<3000)"
#: ``answers`` alone: the concurrency the incident's answers changed at.
ANSWERS_LEVEL = 64

_ANSWERS = re.compile(r"^answers(?:@C(?P<level>[1-9]\d*))?$")
_THRESHOLD = re.compile(r"^(?P<metric>throughput)@C(?P<level>[1-9]\d*)(?P<op>[<>])(?P<value>.+)$")


class ProbeTestKind(StrEnum):
    """How a probe's visit is tested (stored: values unchanged)."""

    SOAK = "soak"
    THRESHOLD = "threshold"
    ANSWERS = "answers"


@dataclass(frozen=True)
class ProbeTest:
    """The test: a soak replay, or a run at ``concurrency`` failing when its ``metric`` is below
    ``value`` (``below``) or above it."""

    kind: ProbeTestKind = ProbeTestKind.SOAK
    metric: str = ""
    concurrency: int = 0
    below: bool = True
    value: float = 0.0

    def __str__(self) -> str:
        if self.kind is ProbeTestKind.SOAK:
            return "soak"
        if self.kind is ProbeTestKind.ANSWERS:
            return f"answers@C{self.concurrency}"
        return f"{self.metric}@C{self.concurrency}{'<' if self.below else '>'}{self.value:g}"

    def fails(self, measured: float) -> bool:
        """Whether a run that measured ``measured`` fails the threshold."""
        return measured < self.value if self.below else measured > self.value


def _check_level(raw: str) -> None:
    """Refuse a test's ``@C`` level past :data:`MAX_REQUESTS` (a run's most requests): the bench
    it runs would hold a slot each (``answers@C99999999999999999999`` raised MemoryError)."""
    level = re.match(r"^\w+@C(\d+)", raw)
    if level is not None and (len(level[1]) > 9 or int(level[1]) > MAX_REQUESTS):
        shown = raw if len(raw) <= 24 else f"{raw[:24]}… ({len(raw):,} characters)"
        raise CaseError(f"--test {shown!r}: its level is over the most allowed, "
                        f"C{MAX_REQUESTS:,} (a run's most requests)")  # fmt: skip


def parse_probe_test(text: str) -> ProbeTest:
    """``soak``, ``answers`` (``answers@C32``) or ``throughput@C64<3000`` (:class:`CaseError`
    otherwise)."""
    raw = text.strip()
    _check_level(raw)
    if raw == "soak":
        return ProbeTest()
    if (answers := _ANSWERS.match(raw)) is not None:
        level = int(answers["level"]) if answers["level"] else ANSWERS_LEVEL
        return ProbeTest(ProbeTestKind.ANSWERS, "answers", level)
    found = _THRESHOLD.match(raw)
    try:
        value = float(found["value"]) if found is not None else float("nan")
    except ValueError:
        value = float("nan")
    if found is None or not value > 0 or value == float("inf"):
        raise CaseError(f"bad test {text!r}: expected {TEST_FORM}")
    kind, level, below = ProbeTestKind.THRESHOLD, int(found["level"]), found["op"] == "<"
    return ProbeTest(kind, found["metric"], level, below, value)


def round_order(rnd: int) -> tuple[str, str]:
    """The arms of round ``rnd`` (0-based), ABBA: bad probe, probe bad, bad probe, ..."""
    return (ARM_BAD, ARM_PROBE) if rnd % 2 == 0 else (ARM_PROBE, ARM_BAD)


def judge_probe(
    bad: ArmTally, probe: ArmTally, *, alpha: float, effect: float, rounds: int
) -> tuple[ProbeOutcome | None, Decision]:
    """After a round: the probe's outcome (None: not decided yet) and the decision it rests on,
    each look at ``alpha / rounds``."""
    level = alpha / rounds
    decision = decide(bad, probe, alpha=level, effect=effect, confidence=1.0 - level)
    if decision.outcome == CONVICTED:
        return ProbeOutcome.GOOD, decision
    if decision.outcome == EXONERATED:
        return ProbeOutcome.BAD, decision
    return None, decision


@dataclass(frozen=True)
class ProbeVisit:
    """One visit of one arm: its round (0-based), the proof it was live, what it ran (a soak, or
    bench runs with the metric each measured) and how many of its units failed."""

    round: int = 0
    arm: str = ""
    units: int = 0
    failed: int = 0
    verification_id: int | None = None
    soak_id: int | None = None
    bench_run_ids: tuple[int, ...] = ()
    measured: tuple[float, ...] = ()
    elapsed_s: float = 0.0
    #: a threshold test's wrong answers over its runs (a run with one fails, however fast)
    wrong_answers: int = 0
    #: an answers test's load reached on the decode (:mod:`servelab.core.case.load`: a probe's
    #: arm below the load its bad arm failed at cannot be called good)
    reached: Annotated[ReachedLoad | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class ProbeRecord:
    """A probe done (the case event ``probe``): bisection ``bisect_id``'s probe ``number``
    (1-based), the changes it applied (indices into the bisection's changes), its outcome, the
    rounds it ran, both arms' tallies, the last decision and every visit."""

    KIND: ClassVar[str] = "probe"

    case_id: int = 0
    bisect_id: int = 0
    number: int = 0
    changes: tuple[int, ...] = ()
    outcome: ProbeOutcome = ProbeOutcome.UNDECIDED
    rounds: int = 0
    bad: ArmTally = field(default_factory=ArmTally)
    probe: ArmTally = field(default_factory=ArmTally)
    decision: Decision = field(default_factory=Decision)
    visits: tuple[ProbeVisit, ...] = ()
    elapsed_s: float = 0.0
    #: an answers test's load check of the probe's arm (:func:`servelab.core.case.load.guard_probe`)
    load: Annotated[LoadCheck | None, OMITTED_IF_NONE] = None


def _none_if_empty(value: Any) -> Any:
    """A bisection's stored ``bench`` of a soak test, ``{}``, reads as None."""
    return None if value == {} else value


def _empty_if_none(value: BenchConfig | None, encoded: SerializerFunctionWrapHandler) -> Any:
    """No bench (a soak test's) is stored as ``{}``, as every bisection stored it."""
    return {} if value is None else encoded(value)


@dataclass(frozen=True)
class BisectRecord:
    """A bisection started (the case event ``bisect``): the changes, the test, the points they
    came from (``good``/``bad``; ``listed``: given with ``--change``), the rule (``rounds`` at
    most per probe, ``alpha``, ``effect``), and the workload (the soak replayed, ``sessions``
    per visit; the bench runs per visit of a threshold test)."""

    KIND: ClassVar[str] = "bisect"

    case_id: int = 0
    changes: tuple[Change, ...] = ()
    test: ProbeTest = field(default_factory=ProbeTest)
    good: str = ""
    bad: str = ""
    rounds: int = 3
    alpha: float = ALPHA
    effect: float = EFFECT
    workload_soak_id: int | None = None
    sessions: int | None = None
    runs: int = 1
    #: a threshold or answers test's bench config, one run at the test's concurrency a visit
    #: (None: a soak test's; stored as ``{}``, as it always was)
    bench: Annotated[
        BenchConfig | None, BeforeValidator(_none_if_empty), WrapSerializer(_empty_if_none)
    ] = None
    #: the deployment it was started on (issue 38): its spec's name, the mark of its first
    #: change's service (``spec_mark``) and the spec file; None: recorded before it was named
    #: (then not stored: an older record is stored again as it was)
    deployment: Omitted[str] = None
    mark: Omitted[str] = None
    spec: Omitted[str] = None


@dataclass(frozen=True)
class BisectConclusion:
    """A bisection ended (the case event ``bisected``): bisection ``bisect_id``'s result, the
    verdicts it supports (target → convicted/exonerated), and what it took."""

    KIND: ClassVar[str] = "bisected"

    case_id: int = 0
    bisect_id: int = 0
    result: Bisected = field(default_factory=lambda: Bisected((), (), False, (), 0, 0))
    verdicts: tuple[tuple[str, str], ...] = ()
    visits: int = 0
    elapsed_s: float = 0.0
    #: whether the bad state failed in the good state's probe (the first); None: recorded before
    #: the good state was probed (then not stored)
    reproduced: Omitted[bool] = None


def change_target(change: Change) -> str:
    """The case target of a change: ``knob:SERVICE/NAME``."""
    return str(Target("knob", change.knob, change.service))


def bisect_verdicts(changes: Sequence[Change], result: Bisected) -> tuple[tuple[str, str], ...]:
    """What ``result`` supports (see the module docstring): ``(target, verdict)`` per change."""
    if result.good_state is not ProbeOutcome.GOOD:
        return ()  # the failure not shown to come with the changes: no verdict either way
    guilty = set(result.indices)
    out = []
    for i, change in enumerate(changes):
        if i not in guilty:
            out.append((change_target(change), EXONERATED))
        elif i not in result.unproven:
            out.append((change_target(change), CONVICTED))
    return tuple(out)
