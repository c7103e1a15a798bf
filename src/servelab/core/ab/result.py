"""One A/B's result (pure): what ops builds as the A/B runs, what the ledger stores as an
``ab_runs`` row's result, what ``ab --json`` prints, and what report renders, live and from the
ledger.

:class:`AbResult` names the experiment (service, knob, the two values), keeps every
:class:`ArmVisit` in the order it ran, each arm's throughput table (:class:`AbArm`), the
comparisons and anomalies of :mod:`servelab.core.ab.compare`, the design it ran with and what it
cost (:class:`AbDesign`), and the servers' cross-check of :mod:`servelab.core.ab.crosscheck`
(derived from the visits, written to the JSON as ``server_disagreements``). It is read and written
by the codec (:mod:`servelab.core.ledger.codec`); :func:`upgrade_ab_result` turns the shapes older
servelab stored into today's first.

The first A/Bs (before visits and the design were recorded) stored the arms, comparisons and
anomalies only: such a result has no visits and the default design (nothing recorded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Annotated, Any

from pydantic import computed_field

from servelab.core.ab.compare import Anomaly, Comparison, Verdict, compare_arms, curve_drops
from servelab.core.ab.crosscheck import ServerDisagreement, disagreements, server_ratios
from servelab.core.ab.design import ORDER_ABBA, DesignCost, Order, VisitCost, fixed_design, spent
from servelab.core.ab.paired import log_ratios
from servelab.core.ab.sequential import (
    DEFAULT_BOUNDARY,
    Boundary,
    Decision,
    first_decision,
    looks_for,
)
from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswersUnchecked
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.knob import same_value
from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = [
    "CAPACITY_LEVEL",
    "AbArm",
    "AbDesign",
    "AbMetric",
    "AbNames",
    "AbResult",
    "ArmVisit",
    "Decided",
    "Keep",
    "NotKept",
    "Stop",
    "arm_throughput",
    "better_arm",
    "conclude",
    "kept_value",
    "not_kept",
    "undecided_levels",
    "upgrade_ab_result",
]


class Keep(StrEnum):
    """``ab --keep``'s words for the value an A/B leaves live at its end (any other text is the
    value itself; none: the original value, restored)."""

    BETTER = "better"
    BASELINE = "baseline"
    CANDIDATE = "candidate"


class NotKept(StrEnum):
    """Why the value ``--keep`` named was not left live (stored: values unchanged)."""

    ANSWERS_CHANGED = "answers changed"
    ANSWERS_UNSHOWN = "answers not shown unchanged"
    PAIR_FAILED = "pair layer failed"


class AbMetric(StrEnum):
    """What each visit measures and the arms are compared on (stored: values unchanged):
    output tok/s per concurrency (the steady state's), goodput per concurrency (requests/s that
    met the SLO), or the capacity (the largest load meeting the SLO, one value per visit, under
    :data:`CAPACITY_LEVEL`)."""

    THROUGHPUT = "throughput"
    GOODPUT = "goodput"
    CAPACITY = "capacity"


#: The one "concurrency" an A/B on capacity keys its values by (the search spans the levels).
CAPACITY_LEVEL = 0


class Stop(StrEnum):
    """Why the A/B ran no more rounds (stored: values unchanged)."""

    FIXED = "fixed design"
    DECIDED = "every concurrency decided"
    MAX_ROUNDS = "max rounds reached"


@dataclass(frozen=True)
class ArmVisit:
    """One measurement of one arm: the proof it was live, and throughput per concurrency.

    ``position`` is its place in the visit plan, ``order`` its round's order (``256→512``);
    ``overhead_s`` the set + restart + verify time, ``bench_s`` each concurrency's run time;
    ``server_throughput`` the output tok/s the decodes' own counters gave per concurrency (whole
    run; absent: unknown); ``load_requests`` the requests its runs sent (a deadline: fewer)."""

    arm: str
    round: int
    verification_id: int | None
    live_value: str | None
    throughput: Mapping[int, float]
    failed_requests: int
    bench_run_ids: tuple[int, ...] = ()
    position: int = 0
    order: str = ""
    overhead_s: float = 0.0
    bench_s: Mapping[int, float] = field(default_factory=dict)
    server_throughput: Mapping[int, float] = field(default_factory=dict)
    #: what its answer probes were answered (None: answers not checked)
    answers: Annotated[tuple[Answer, ...] | None, OMITTED_IF_NONE] = None
    #: the pair layer's failed checks when the arm was made live (None: every pair agreed):
    #: the arm is measured, but never kept
    pair_failed: Annotated[tuple[str, ...] | None, OMITTED_IF_NONE] = None
    load_requests: Annotated[int | None, OMITTED_IF_NONE] = None  # None: recorded before counted

    @property
    def cost(self) -> VisitCost:
        return VisitCost(self.overhead_s, dict(self.bench_s))


@dataclass(frozen=True)
class AbArm:
    """One arm: the knob's value, the verification of each visit, throughput by concurrency
    (one value per visit, in the order they ran)."""

    value: str
    verifications: tuple[int | None, ...] = ()
    throughput: Mapping[int, tuple[float, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Decided:
    """Where the stopping rule decided a concurrency: after ``rounds`` rounds (None: never)."""

    rounds: int | None
    decision: Decision


@dataclass(frozen=True)
class AbDesign:
    """How the A/B ran: the visit order (``order_seed`` for ``random``), the stopping rule
    (``until_decided`` within ``max_rounds`` rounds, ``margin``, ``boundary``), the concurrencies,
    the metric compared (and the SLO judging it), then what happened: the rounds run, why it
    stopped, each concurrency's decision, the cost of the visits and of the fixed design of
    ``max_rounds`` rounds (priced at ``gpus`` GPUs), the journal's session, and every drop of
    throughput with concurrency (significant or not)."""

    order: Order = ORDER_ABBA
    order_seed: int = 0
    until_decided: bool = False
    max_rounds: int = 0
    margin: float | None = None
    boundary: Boundary = DEFAULT_BOUNDARY
    concurrencies: tuple[int, ...] = ()
    rounds_run: int = 0
    stopped: Stop = Stop.FIXED
    decided: Mapping[int, Decided] = field(default_factory=dict)
    cost: DesignCost | None = None
    fixed_cost: DesignCost | None = None
    gpus: int = 1
    session_id: int | None = None
    resumed: bool = False
    drops: tuple[Anomaly, ...] = ()
    #: what the arms are compared on (None: throughput, as every A/B before the metric was
    #: recorded), and the SLO that judged it (``--slo``'s text; None: none); left out of the
    #: JSON while None, so an older A/B is written back as it was stored
    metric: Annotated[AbMetric | None, OMITTED_IF_NONE] = None
    slo: Annotated[str | None, OMITTED_IF_NONE] = None

    @property
    def compared(self) -> AbMetric:
        """What the arms were compared on."""
        return self.metric or AbMetric.THROUGHPUT

    @property
    def looks(self) -> int | None:
        """The most looks the stopping rule's interval covers (None: any number, Lai's)."""
        return looks_for(self.boundary, self.max_rounds)


@dataclass(frozen=True)
class AbResult:
    """What an A/B of ``service``'s ``knob`` (``baseline`` against ``candidate``) found; ``ab_id``
    is its ``ab_runs`` row once recorded, ``original`` the knob's value before it, ``restored``
    whether that value came back, ``kept`` the value left live instead (``--keep``), ``not_kept``
    why the value ``--keep`` named was not."""

    service: str
    knob: str
    baseline: str
    candidate: str
    original: str | None = None
    restored: bool = False
    kept: Annotated[str | None, OMITTED_IF_NONE] = None
    #: why the value ``--keep`` named was not kept (None: it was, or none was named)
    not_kept: Annotated[NotKept | None, OMITTED_IF_NONE] = None
    arms: tuple[AbArm, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()
    ab_id: int | None = None
    visits: tuple[ArmVisit, ...] = ()
    design: AbDesign = field(default_factory=AbDesign)
    #: the arms' answers judged (:mod:`servelab.core.answers.judge`; None: not checked)
    answers: Annotated[AnswersJudgement | None, OMITTED_IF_NONE] = None
    #: why answers asked for (``--answers check|gate``) were not checked (None: they were, or
    #: ``--answers off``)
    answers_unchecked: Annotated[AnswersUnchecked | None, OMITTED_IF_NONE] = None

    def throughput(self, arm: str) -> Mapping[int, tuple[float, ...]]:
        """Each concurrency's throughput of ``arm`` (its value), one value per visit."""
        return next((a.throughput for a in self.arms if a.value == arm), {})

    def server_throughput(self, arm: str) -> dict[int, list[float]]:
        """Each concurrency's server-counted tok/s of ``arm``, one value per visit that had one."""
        out: dict[int, list[float]] = {}
        for visit in self.visits:
            if visit.arm == arm:
                for conc, thr in visit.server_throughput.items():
                    out.setdefault(conc, []).append(thr)
        return out

    @computed_field  # type: ignore[prop-decorator]
    @property
    def server_disagreements(self) -> tuple[ServerDisagreement, ...]:
        """Where the client's ratio and the servers' disagree
        (:mod:`servelab.core.ab.crosscheck`)."""
        servers = server_ratios(
            self.server_throughput(self.baseline), self.server_throughput(self.candidate)
        )
        return tuple(disagreements({c.concurrency: c.ratio for c in self.comparisons}, servers))


def arm_throughput(visits: Sequence[ArmVisit], arm: str) -> dict[int, list[float]]:
    """Each concurrency's throughput of ``arm`` over ``visits``, in the order they ran."""
    out: dict[int, list[float]] = {}
    for visit in visits:
        if visit.arm == arm:
            for conc, thr in visit.throughput.items():
                out.setdefault(conc, []).append(thr)
    return out


def undecided_levels(result: AbResult, rnd: int) -> tuple[int, ...]:
    """The concurrencies round ``rnd`` still measures: all of them in the fixed design; with the
    stopping rule, those the rounds before it left undecided."""
    design = result.design
    if not design.until_decided:
        return design.concurrencies
    done = [v for v in result.visits if v.round < rnd]
    base, cand = arm_throughput(done, result.baseline), arm_throughput(done, result.candidate)
    return tuple(
        c
        for c in design.concurrencies
        if first_decision(
            _positive_log_ratios(base.get(c, []), cand.get(c, [])), design.margin,
            looks=design.looks,
        )[1]
        == Decision.UNDECIDED
    )  # fmt: skip


def _positive_log_ratios(base: Sequence[float], cand: Sequence[float]) -> tuple[float, ...]:
    """The per-round log ratios; none while a value is not positive (a goodput of 0: no
    ratio, so the stopping rule cannot decide on it)."""
    if any(v <= 0 for v in (*base, *cand)):
        return ()
    return log_ratios(base, cand)


def _stopped(result: AbResult) -> Stop:
    if not result.design.until_decided:
        return Stop.FIXED
    return Stop.MAX_ROUNDS if undecided_levels(result, result.design.max_rounds) else Stop.DECIDED


def better_arm(result: AbResult) -> str | None:
    """The arm the concluded verdicts favour: the candidate when it is better at some
    concurrency and worse at none, the baseline when the other way round; None when no verdict
    decided it, or they disagree. A candidate that changes answers (gated) is never better, nor
    one whose answers a gate could not show unchanged (too few probe pairs: its speed alone)."""
    faster = _faster_arm(result)
    if faster == result.candidate and result.answers is not None and result.answers.holds_back:
        return None
    return faster


def _faster_arm(result: AbResult) -> str | None:
    """The arm the concluded verdicts favour on speed alone (answers not asked)."""
    verdicts = {c.verdict for c in result.comparisons}
    if Verdict.BETTER in verdicts and Verdict.WORSE not in verdicts:
        return result.candidate
    if Verdict.WORSE in verdicts and Verdict.BETTER not in verdicts:
        return result.baseline
    return None


def kept_value(keep: str | None, result: AbResult) -> str | None:
    """The value a concluded A/B leaves live (None: the original, restored): ``better`` the
    arm :func:`better_arm` names (None when it names none), ``baseline``/``candidate`` that
    arm's value, any other text the arm it names, compared as numbers (``064`` is the arm
    ``64``) and kept in the arm's own spelling (``ab`` refuses a value that names neither arm
    up front; a journal written before that rule keeps what it asked for). A value
    :func:`not_kept` refuses is never kept, whichever way it is asked for: the original is
    restored."""
    return None if not_kept(keep, result) is not None else _asked(keep, result)


def not_kept(keep: str | None, result: AbResult) -> NotKept | None:
    """Why the value ``keep`` names is not left live (None: it is, or none was named): the
    candidate, under the answers gate, unless its answers were shown unchanged (it changes
    them, or too few probe pairs showed them unchanged: :attr:`AnswersJudgement.holds_back`);
    any arm whose pair layer failed in a visit (:attr:`ArmVisit.pair_failed`). ``better`` when
    the candidate is faster but held back names the candidate: not kept, and why."""
    value, judged = _asked(keep, result), result.answers
    if keep == Keep.BETTER and value is None:
        value = _faster_arm(result)
    if value is None:
        return None
    if value == result.candidate and judged is not None and judged.holds_back:
        return NotKept.ANSWERS_CHANGED if judged.gates else NotKept.ANSWERS_UNSHOWN
    return NotKept.PAIR_FAILED if _pair_failed(result, value) else None


def _asked(keep: str | None, result: AbResult) -> str | None:
    """The arm's value ``keep`` names (``better``: :func:`better_arm`'s; None: none)."""
    match keep:
        case None:
            return None
        case Keep.BETTER:
            return better_arm(result)
        case Keep.BASELINE:
            return result.baseline
        case Keep.CANDIDATE:
            return result.candidate
        case _:
            named = (arm for arm in (result.candidate, result.baseline) if same_value(keep, arm))
            return next(named, keep)


def _pair_failed(result: AbResult, value: str | None) -> bool:
    """Whether a visit of the arm at ``value`` failed the pair layer (never kept)."""
    return any(v.pair_failed for v in result.visits if v.arm == value)


def conclude(result: AbResult) -> AbResult:
    """``result`` with everything its visits say worked out: each arm's table, the comparisons
    and decisions, the anomalies (the significant drops), why it stopped, and the cost of the
    visits against the fixed design's."""
    design = result.design
    base = arm_throughput(result.visits, result.baseline)
    cand = arm_throughput(result.visits, result.candidate)
    comparisons = compare_arms(base, cand, baseline_label=result.baseline,
                               candidate_label=result.candidate, margin=design.margin,
                               looks=design.looks)  # fmt: skip
    decided = {
        c: Decided(
            *first_decision(
                _positive_log_ratios(base[c], cand[c]), design.margin, looks=design.looks
            )
        )
        for c in sorted(set(base) & set(cand))
    }
    drops = (*curve_drops(result.baseline, base), *curve_drops(result.candidate, cand))
    costs = [v.cost for v in result.visits]
    rounds_run = len({v.round for v in result.visits})
    design = replace(
        design,
        rounds_run=rounds_run,
        stopped=_stopped(result),
        decided=decided,
        cost=spent(costs, rounds_run, design.gpus),
        fixed_cost=fixed_design(costs, design.max_rounds, design.concurrencies, design.gpus),
        drops=drops,
    )
    arms = tuple(
        AbArm(
            value,
            tuple(v.verification_id for v in result.visits if v.arm == value),
            {c: tuple(thr[c]) for c in sorted(thr)},
        )
        for value, thr in ((result.baseline, base), (result.candidate, cand))
    )
    anomalies = tuple(d for d in drops if d.significant)
    return replace(result, arms=arms, comparisons=tuple(comparisons), anomalies=anomalies,
                   design=design)  # fmt: skip


# -- older shapes ---------------------------------------------------------------------------------


def _arm(arm: Any) -> Any:
    """An arm of the first A/Bs carried ``label`` next to ``value`` (equal): ``value`` wins."""
    if not isinstance(arm, Mapping) or "label" not in arm:
        return arm
    rest = {k: v for k, v in arm.items() if k != "label"}
    return {**rest, "value": arm["value"] if "value" in arm else arm["label"]}


def _design(doc: Mapping[str, Any], arms: Sequence[Any]) -> Any:
    """A design recorded before its concurrencies were: the ones its arms measured."""
    design = doc.get("design")
    if not isinstance(design, Mapping) or "concurrencies" in design:
        return design
    levels = {int(c) for a in arms if isinstance(a, Mapping) for c in a.get("throughput") or {}}
    return {**design, "concurrencies": sorted(levels)}


@dataclass(frozen=True)
class AbNames:
    """What an ``ab_runs`` row says of its result: its service and knob, the values its config
    compared (None: the row does not say)."""

    service: str | None = None
    knob: str | None = None
    baseline: str | None = None
    candidate: str | None = None


def upgrade_ab_result(doc: Any, named: AbNames | None = None) -> Any:
    """A stored A/B result of any servelab in today's shape (the codec reads the rest, a key
    it lacks as the field's default): arms that carry ``label`` read ``value``, a design without
    its concurrencies gets the ones its arms measured. ``named``: what its row says of it, for a
    result that does not name itself; else its arms' values name its baseline and candidate."""
    if not isinstance(doc, Mapping):
        return doc
    arms = [_arm(a) for a in doc.get("arms") or ()]
    values = [a.get("value") for a in arms if isinstance(a, Mapping)] + ["", ""]
    names = {"baseline": values[0], "candidate": values[1]}
    names |= {k: v for k, v in vars(named or AbNames()).items() if v is not None}
    upgraded = {**names, **doc, "arms": arms}
    if "design" in doc:
        upgraded["design"] = _design(doc, arms)
    return upgraded
