"""The verdict experiment's statistics and its rule (pure).

``case test`` runs the case's failing workload with the suspect in place (arm ``suspect``: the
knob's suspected value, or traffic through the component) and without it (arm ``revert``: the
knob's revert value, or traffic that bypasses the component). Each arm yields sessions that failed
out of sessions run. The two failure rates are compared with **Fisher's exact test** (two-sided,
on the 2×2 table failed/passed × suspect/revert: the hypergeometric probabilities of every table
with the same margins that is no more likely than the one observed, summed — as
``scipy.stats.fisher_exact`` computes it, which the tests check; computed here with
:func:`math.comb` so that no command pays for importing ``scipy.stats``), and the
difference ``d = rate(suspect) − rate(revert)`` gets **Newcombe's hybrid score interval** (method
10 of Newcombe 1998: the two Wilson score intervals combined; it behaves at 0/n and n/n, where the
Wald interval collapses).

The rule (:func:`decide`), with ``α`` (default 0.05) and a meaningful effect ``δ`` (default 0.5:
the revert would spare at least half the sessions):

- **convicted** when ``p < α`` and ``d > 0`` (the failure rate drops with the revert);
- **inconclusive** when the suspect arm never failed (the failure did not reproduce: nothing to
  explain), or when neither of the other rules holds;
- **exonerated** when the interval's upper bound is below ``δ`` and the revert arm failed too:
  the experiment excludes the revert curing a meaningful share of the failures (both arms
  failing alike, with enough sessions, lands here); a revert arm that never failed may have
  cured a failure too rare for ``δ`` to bound (2 of 21 against 0 of 21 bounds ``d`` under 0.29,
  yet every failure went with the revert), so that is **inconclusive** (``RULE_NOT_PERSISTED``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Annotated, Any, ClassVar

from pydantic import (
    BeforeValidator,
    SerializerFunctionWrapHandler,
    WrapSerializer,
    computed_field,
)

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.reached import LoadCheck, ReachedLoad
from servelab.core.ledger.codec import OMITTED_IF_NONE, decode, encode
from servelab.core.soak.result import SoakConfig
from servelab.errors import RecordError

__all__ = [
    "ALPHA",
    "ARM_REVERT",
    "ARM_SUSPECT",
    "CONVICTED",
    "EFFECT",
    "EXONERATED",
    "INCONCLUSIVE",
    "INTERVAL",
    "NOT_SHOWN",
    "OUTCOMES",
    "RULE_BOUND",
    "RULE_NEITHER",
    "RULE_NOT_PERSISTED",
    "RULE_NOT_REPRODUCED",
    "RULE_SIGNIFICANT",
    "TEST",
    "ArmTally",
    "BenchWorkload",
    "Decision",
    "ExperimentRecord",
    "ExperimentVisit",
    "abba_order",
    "decide",
    "fisher_p",
    "newcombe_interval",
    "tally",
    "wilson_interval",
]

CONVICTED = "convicted"
EXONERATED = "exonerated"
INCONCLUSIVE = "inconclusive"
#: an answers test that did not reach the load the wrong answers need: it clears nothing
#: (:mod:`servelab.core.case.load`)
NOT_SHOWN = "not_shown"
OUTCOMES = (CONVICTED, EXONERATED, INCONCLUSIVE, NOT_SHOWN)

ALPHA = 0.05
EFFECT = 0.5
TEST = "Fisher's exact test (two-sided)"
INTERVAL = "Newcombe hybrid score interval (method 10) on rate(suspect) - rate(revert)"

ARM_SUSPECT = "suspect"
ARM_REVERT = "revert"

#: Why the rule gave its outcome (codes; wording in :mod:`servelab.report.case`).
RULE_SIGNIFICANT = "p_below_alpha_and_fewer_failures_with_the_revert"
RULE_BOUND = "upper_bound_below_effect"
RULE_NOT_REPRODUCED = "suspect_arm_never_failed"
RULE_NEITHER = "neither_rule_holds"
RULE_NOT_PERSISTED = "revert_arm_never_failed"


@dataclass(frozen=True)
class ArmTally:
    """One arm's sessions: how many ran, how many failed."""

    arm: str = ""
    value: str | None = None
    sessions: int = 0
    failed: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate(self) -> float | None:
        return self.failed / self.sessions if self.sessions else None


def fisher_p(suspect: ArmTally, revert: ArmTally) -> float:
    """Two-sided p-value of Fisher's exact test on the arms' failed/passed counts.

    With the margins fixed (``n1``, ``n2`` sessions, ``k`` failures in all), the suspect arm's
    failures ``x`` are hypergeometric: ``P(x) = C(n1, x) C(n2, k − x) / C(n1 + n2, k)``. The
    p-value sums ``P(x)`` over every ``x`` no more likely than the observed one (with scipy's
    relative tolerance of 1e-7 for ties).
    """
    n1, n2 = suspect.sessions, revert.sessions
    k = suspect.failed + revert.failed
    total = math.comb(n1 + n2, k)
    if total == 0 or n1 == 0 or n2 == 0:
        return 1.0
    probs = [math.comb(n1, x) * math.comb(n2, k - x) / total for x in range(k + 1)]
    observed = probs[suspect.failed]
    return min(1.0, sum(p for p in probs if p <= observed * (1 + 1e-7)))


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(failed: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``failed/n`` (``(0, 1)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 1.0
    z, p = _z(confidence), failed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_interval(
    suspect: ArmTally, revert: ArmTally, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval of ``rate(suspect) − rate(revert)``."""
    p1, p2 = suspect.rate or 0.0, revert.rate or 0.0
    l1, u1 = wilson_interval(suspect.failed, suspect.sessions, confidence)
    l2, u2 = wilson_interval(revert.failed, revert.sessions, confidence)
    d = p1 - p2
    lower = d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    upper = d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, lower), min(1.0, upper)


@dataclass(frozen=True)
class Decision:
    """The experiment's outcome, the rule that gave it, and the numbers it read (the defaults:
    the decision of no data, what a detail that lacks them reads as)."""

    outcome: str = INCONCLUSIVE
    rule: str = RULE_NEITHER
    p_value: float = 1.0
    difference: float = 0.0
    interval: tuple[float, float] = (-1.0, 1.0)
    alpha: float = ALPHA
    effect: float = EFFECT
    confidence: float = 0.95
    test: str = TEST
    interval_name: str = INTERVAL


def decide(
    suspect: ArmTally,
    revert: ArmTally,
    *,
    alpha: float = ALPHA,
    effect: float = EFFECT,
    confidence: float = 0.95,
) -> Decision:
    """Apply the rule of this module's docstring to the two arms."""
    p = fisher_p(suspect, revert)
    d = (suspect.rate or 0.0) - (revert.rate or 0.0)
    ci = newcombe_interval(suspect, revert, confidence)
    if p < alpha and d > 0:
        outcome, rule = CONVICTED, RULE_SIGNIFICANT
    elif suspect.failed == 0:
        outcome, rule = INCONCLUSIVE, RULE_NOT_REPRODUCED
    elif ci[1] < effect and revert.failed > 0:
        outcome, rule = EXONERATED, RULE_BOUND
    elif ci[1] < effect:
        outcome, rule = INCONCLUSIVE, RULE_NOT_PERSISTED
    else:
        outcome, rule = INCONCLUSIVE, RULE_NEITHER
    return Decision(outcome, rule, p, d, ci, alpha, effect, confidence)


def abba_order(rounds: int) -> list[str]:
    """The arms' order, counterbalanced: suspect revert, revert suspect, suspect revert, ..."""
    pair = (ARM_SUSPECT, ARM_REVERT)
    return [arm for r in range(rounds) for arm in (pair if r % 2 == 0 else pair[::-1])]


# -- the record --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentVisit:
    """One visit of one arm: its value, the proof it was live, the soak it ran and its tally."""

    round: int = 0
    arm: str = ""
    value: str | None = None
    sessions: int = 0
    failed: int = 0
    verification_id: int | None = None
    soak_id: int | None = None
    elapsed_s: float = 0.0
    #: an answers test's load reached on the decode (None: a soak test, or an older record)
    reached: Annotated[ReachedLoad | None, OMITTED_IF_NONE] = None


def tally(visits: Sequence[ExperimentVisit], arm: str, value: str | None) -> ArmTally:
    """The sessions and failures of ``arm`` over ``visits``."""
    mine = [v for v in visits if v.arm == arm]
    return ArmTally(arm, value, sum(v.sessions for v in mine), sum(v.failed for v in mine))


@dataclass(frozen=True)
class BenchWorkload:
    """A threshold or answers test's workload: the test (as written) and the bench config its
    arms ran; stored flat, ``{"test": ..., **bench}``, as it always was."""

    test: str
    bench: BenchConfig


def _workload_of(value: Any) -> Any:
    """A stored workload read as its type: flat with a ``test``, a bench's; else a soak's config;
    ``{}`` (an experiment of no data), or one that no longer reads, None: nothing reads it but
    the record's own JSON, and the ledger export shows the row as stored."""
    if not isinstance(value, Mapping):
        return value
    try:
        if "test" in value:
            bench = decode(BenchConfig, {k: v for k, v in value.items() if k != "test"})
            return BenchWorkload(str(value["test"]), bench)
        return decode(SoakConfig, value) if value else None
    except RecordError:
        return None


def _stored_workload(value: Any, encoded: SerializerFunctionWrapHandler) -> Any:
    if value is None:
        return {}
    if isinstance(value, BenchWorkload):
        return {"test": value.test, **encode(value.bench)}
    return encoded(value)


@dataclass(frozen=True)
class ExperimentRecord:
    """A ``case test``: what was tested, every visit, the arms' tallies and the decision.

    The case event ``experiment`` stores it (through the codec: a field its detail lacks reads
    as its default, an experiment of no data); ``found`` is the knob's value when the experiment
    began and ``left`` the value it left (the same: it is put back as found).
    """

    KIND: ClassVar[str] = "experiment"

    case_id: int = 0
    target: str = ""
    suspect_value: str | None = None
    revert_value: str | None = None
    rounds: int = 0
    workload_soak_id: int | None = None
    decision: Decision = field(default_factory=Decision)
    suspect: ArmTally = field(default_factory=ArmTally)
    revert: ArmTally = field(default_factory=ArmTally)
    visits: tuple[ExperimentVisit, ...] = ()
    found: str | None = None
    left: str | None = None
    elapsed_s: float = 0.0
    #: what the arms ran: a soak test's soak config, a threshold or answers test's bench (None:
    #: an older record's, or one that no longer reads; stored as ``{}``)
    workload: Annotated[
        SoakConfig | BenchWorkload | None,
        BeforeValidator(_workload_of),
        WrapSerializer(_stored_workload),
    ] = None
    #: an answers test's suspect arm's reached load against the load to reach (None: a soak
    #: test, or an older record)
    load: Annotated[LoadCheck | None, OMITTED_IF_NONE] = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> str:
        return self.decision.outcome
