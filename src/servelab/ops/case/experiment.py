"""``case test``: decide a suspect's verdict by a controlled experiment.

The workload is the case's newest failing soak (its recorded
:class:`~servelab.core.soak.result.SoakConfig`, run without localization or the determinism probe so
each visit is short). Two arms:

- a **knob** suspect: the knob at its suspected value (arm ``suspect``) and at its revert value
  (arm ``revert``) (:func:`servelab.core.case.revert.experiment_values`). Every visit makes its
  arm live as ``ab`` does (:func:`servelab.ops.arm.make_live`: the knob set and recorded, but not
  under the case: the case's restore plan is made of its reverts alone; the service and its
  dependents co-restarted in start order; the value proven by the config, live and e2e layers of
  ``verify`` and read back from the process) before the soak runs; an arm that is not live is not
  measured (the experiment stops, :class:`~servelab.errors.BenchError`);
- a **component** suspect in front of the router (a proxy): the workload through the entry point
  (``suspect``) and straight to the router, bypassing it (``revert``); nothing is restarted.

The arms are counterbalanced, ABBA (:func:`~servelab.core.case.experiment.abba_order`), ``rounds``
visits each. A session fails when it stalled, hit an error, or did not finish its rounds. The
decision is :func:`servelab.core.case.experiment.decide` (Fisher's exact test, Newcombe's interval).
An answers test (``--test answers``) records the load each visit reached on the decode; a suspect
arm below the load the case's wrong answers were seen at (else the requested concurrency) cannot
exonerate: its outcome is ``not_shown`` (:mod:`servelab.core.case.load`).
The knob is left as it was found (also when the experiment stops early). The experiment is
recorded as the case event ``experiment`` and attached to the case as evidence of kind
``experiment`` (its ``ref_id`` the event); each visit's soak is recorded (not attached).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.events import ArmSoaked, CaseTestPlanned, KnobPuttingBack, VisitStarted
from servelab.core.case.experiment import (
    ALPHA,
    ARM_REVERT,
    ARM_SUSPECT,
    EFFECT,
    BenchWorkload,
    ExperimentRecord,
    ExperimentVisit,
    abba_order,
    decide,
    tally,
)
from servelab.core.case.load import arm_load, case_reference, check_load, guard
from servelab.core.case.model import Case, Target, parse_target, revert_changes
from servelab.core.case.probe import ProbeTest, ProbeTestKind
from servelab.core.case.reached import LoadReference
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.case.revert import experiment_values
from servelab.core.deploy.events import CoRestarting
from servelab.core.deploy.putback import KnobBack
from servelab.core.deploy.topology import restart_plan
from servelab.core.ledger.codec import encode
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig, SoakResult, Targets
from servelab.errors import CaseError
from servelab.io.hosts.ownrecord import made_by
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.arguments import argument_knob
from servelab.ops.arm import Setting, make_live
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.case.case import load_case
from servelab.ops.case.caseanswers import CaseAnswers, case_answers
from servelab.ops.case.handedit import knob_history
from servelab.ops.context import Operation, Progress, SpecOrOperation, operation
from servelab.ops.deploy.putback import as_found
from servelab.ops.deploy.upcheck import refuse_not_up
from servelab.ops.fileids import file_identities
from servelab.ops.knob import get_knob, knob_owner, live_knobs
from servelab.ops.soak.soak import soak
from servelab.ops.verify.e2e import bounded_by

__all__ = [
    "CaseTestConfig",
    "CaseTestOutcome",
    "failed_sessions",
    "failing_workload",
    "run_case_test",
    "soak_targets",
]


@dataclass(frozen=True)
class CaseTestConfig:
    """What to test: ``target`` (a suspect of case ``case_id``), ``rounds`` visits per arm."""

    case_id: int
    target: str
    rounds: int = 3
    to: str | None = None
    alpha: float = ALPHA
    effect: float = EFFECT
    sessions: int | None = None  # None: the workload's own
    #: the test: the failing soak replayed (default), or answers (``answers@C64``: each visit
    #: ``runs`` bench runs of ``bench`` carrying the answer probes, a wrong answer a failure)
    test: ProbeTest = dataclasses.field(default_factory=ProbeTest)
    bench: BenchConfig | None = None
    runs: int = 1

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise CaseError("--rounds must be ≥ 1")
        if not 0 < self.alpha < 1 or not 0 < self.effect <= 1:
            raise CaseError("--alpha must be in (0, 1) and --effect in (0, 1]")
        if self.test.kind is ProbeTestKind.THRESHOLD:
            raise CaseError("case test takes --test soak or answers")
        if self.test.kind is ProbeTestKind.ANSWERS and self.bench is None:
            raise CaseError("an answers test needs a bench to run")


@dataclass
class CaseTestOutcome:
    """The experiment's record, and where it went in the ledger."""

    record: ExperimentRecord
    event_id: int | None = None
    evidence_id: int | None = None


@dataclass(frozen=True)
class _Arms:
    target: Target
    suspect: str | None
    revert: str | None
    found: str | None


def failed_sessions(result: SoakResult) -> int:
    """Sessions that stalled, hit an error, or did not finish their rounds."""
    rounds, sessions = result.config.rounds, result.sessions.per_session
    return sum(s.stalled or s.error is not None or s.rounds_done < rounds for s in sessions)


def failing_workload(ledger: Ledger, case: Case, sessions: int | None) -> tuple[int, SoakConfig]:
    """The case's newest failing soak and the config to replay it with (its own knobs left
    out: a visit records what it runs with)."""
    soaks = [
        ledger.get(SoakRunRecord, e.ref_id) for e in case.evidence if e.kind == "soak" and e.ref_id
    ]
    failing = [s for s in soaks if isinstance(s, SoakRunRecord) and s.ok is False]
    if not failing:
        raise CaseError(
            f"case {case.id} has no failing soak to replay; attach one: "
            f"servelab soak --case {case.id} (or case evidence {case.id} --soak ID)"
        )
    newest = max(failing, key=lambda s: s.id)
    config = dataclasses.replace(
        newest.result.config, knobs={}, localize=False, check_determinism=False
    )
    if sessions is not None:
        config = dataclasses.replace(config, sessions=sessions)
    return newest.id, config


def soak_targets(op: Operation) -> Targets:
    """Where a replayed soak goes: the entry point, the router behind it."""
    spec = op.spec
    router = spec.router_name
    router_url = spec.services[router].url.rstrip("/") if router else None
    entry = spec.services[spec.entry_point].url.rstrip("/")
    return Targets(entry, router_url, (), router or "router")


async def _arms(op: Operation, ledger: Ledger, case: Case, cfg: CaseTestConfig) -> _Arms:
    target = parse_target(cfg.target)
    if case.suspect(str(target)) is None:
        raise CaseError(
            f"{target} is not a suspect of case {case.id}; first: "
            f"servelab case suspect {case.id} {target} --reason ..."
        )
    if target.kind == "component":
        spec, name = op.spec, target.name
        entry = spec.entry_point
        if name not in spec.services or name != entry or entry == spec.router_name:
            raise CaseError(
                f"{target} cannot be bypassed: only the entry point in front of the router "
                f"(here: {entry}) is tested by sending the workload straight to the router"
            )
        router = soak_targets(op).router_url
        return _Arms(target, spec.services[entry].url.rstrip("/"), router, None)
    service = str(target.service)
    found = await get_knob(op, service, target.name)
    # this deployment's history and reverts (issue 38: another sharing the ledger has its own)
    recorded = knob_history(ledger, op.loaded, service, target.name)
    ours = knob_owner(op.loaded, service)
    mine = [c for c in revert_changes(case) if made_by(c.deployment, ours)]
    suspect, revert = experiment_values(
        mine, recorded, service, target.name, current=found, to=cfg.to
    )
    return _Arms(target, suspect, revert, found)


async def _make_live(
    op: Operation, target: Target, value: str | None, why: str, workload: SoakConfig | None
) -> int | None:
    """The arm at ``value`` made live (:func:`servelab.ops.arm.make_live`: set, co-restart in
    order, proven by the config, live and e2e layers and the value read back); its verification.
    The e2e layer's long prompt waits at most the workload's replay-matrix bound
    (:func:`~servelab.ops.verify.e2e.bounded_by`): the suspect arm may be the hang itself."""
    service = str(target.service)
    value = argument_knob(op, target.name).normalize(value)  # a flag's ``true`` is ``on``
    op.say(CoRestarting(tuple(restart_plan(op.spec, [service], await file_identities(op)))))
    e2e = None if workload is None else bounded_by(workload.deadlines)
    arm = await make_live(op, [Setting(service, target.name, value)], why, e2e_options=e2e)
    return arm.verification_id


async def _visit(
    op: Operation, arms: _Arms, cfg: CaseTestConfig, workload: SoakConfig | None,
    visit: tuple[int, str], answers: CaseAnswers | None = None,
) -> ExperimentVisit:  # fmt: skip
    rnd, arm = visit
    if answers is not None:
        return await answers.visit(op, arms.target, arm, arms.suspect, arms.revert, rnd)
    assert workload is not None
    value = arms.suspect if arm == ARM_SUSPECT else arms.revert
    started = time.monotonic()
    targets = soak_targets(op)
    verification_id = None
    if arms.target.kind == "knob":
        why = f"case {cfg.case_id}: test of {arms.target}, arm {arm}, round {rnd + 1}"
        verification_id = await _make_live(op, arms.target, value, why, workload)
        workload = dataclasses.replace(workload, knobs=await live_knobs(op))
    else:
        targets = Targets(str(value), targets.router_url, (), targets.router_service)
    result = await soak(workload, targets, ledger=op.ledger)
    failed, count = failed_sessions(result), result.sessions.count
    op.say(ArmSoaked(arm, value, failed, count))
    return ExperimentVisit(
        rnd, arm, value, count, failed, verification_id, result.soak_id,
        round(time.monotonic() - started, 3),
    )  # fmt: skip


def _found(arms: _Arms) -> list[KnobBack]:
    """The knob as found (nothing for a component: nothing is changed)."""
    if arms.target.kind != "knob":
        return []
    return [KnobBack(str(arms.target.service), arms.target.name, arms.found)]


async def _leave_as_found(op: Operation, arms: _Arms, workload: SoakConfig | None) -> str | None:
    """Put the knob back as it was found (nothing to do for a component); the value left."""
    if arms.target.kind != "knob":
        return None
    service = str(arms.target.service)
    if await get_knob(op, service, arms.target.name) != arms.found:
        op.say(KnobPuttingBack(service, arms.target.name, arms.found))
        await _make_live(op, arms.target, arms.found, "case test: left as found", workload)
    return await get_knob(op, service, arms.target.name)


async def run_case_test(
    where: SpecOrOperation,
    ledger: Ledger,
    cfg: CaseTestConfig,
    *,
    progress: Progress | None = None,
    up_first: bool = False,
) -> CaseTestOutcome:
    """Run the experiment, record it on the case, and return it (see the module docstring).
    ``up_first`` (``case test``): a deployment not up is refused once the case, the target and
    its values are checked, before any arm is restarted, as ``ab`` refuses it
    (:func:`~servelab.ops.deploy.upcheck.refuse_not_up`, exit 2: it said only "no answer")."""
    started = time.monotonic()
    case = load_case(ledger, cfg.case_id)
    soak_id, workload = None, None
    if cfg.test.kind is ProbeTestKind.SOAK:
        soak_id, workload = failing_workload(ledger, case, cfg.sessions)
    async with operation(where, ledger=ledger, progress=progress) as op:
        arms = await _arms(op, ledger, case, cfg)
        if up_first:
            await refuse_not_up(op, "case test")
        order = abba_order(cfg.rounds)
        answers = None if workload is not None else case_answers(op, cfg, arms.target, arms.revert)
        op.say(CaseTestPlanned(str(arms.target), arms.suspect, arms.revert, cfg.rounds,
                               tuple(order), workload.sessions if workload else 0,
                               workload.rounds if workload else cfg.runs, soak_id))  # fmt: skip
        visits: list[ExperimentVisit] = []
        # A stop signal, or a failure (an arm's restart that did not come up): put back as found.
        async with as_found(op, _found(arms)), as_found_on_failure(op, _found(arms)):
            for i, arm in enumerate(order):
                op.say(VisitStarted(i, len(order), arm))
                visits.append(await _visit(op, arms, cfg, workload, (i // 2, arm), answers))
            if answers is not None:
                visits = answers.judged(visits)
            left = await _leave_as_found(op, arms, workload)
    reference = case_reference(case.events, case.evidence, cfg.test.concurrency)
    record = _record(cfg, arms, visits, soak_id, workload, left, time.monotonic() - started,
                     reference)  # fmt: skip
    return _save(ledger, record)


def _record(
    cfg: CaseTestConfig, arms: _Arms, visits: list[ExperimentVisit], soak_id: int | None,
    workload: SoakConfig | None, left: str | None, elapsed: float, reference: LoadReference,
) -> ExperimentRecord:  # fmt: skip
    suspect = tally(visits, ARM_SUSPECT, arms.suspect)
    revert = tally(visits, ARM_REVERT, arms.revert)
    decision = decide(suspect, revert, alpha=cfg.alpha, effect=cfg.effect)
    load = None
    if cfg.test.kind is ProbeTestKind.ANSWERS:
        load = check_load(arm_load(visits, ARM_SUSPECT), reference)
        decision = guard(decision, load)
    return ExperimentRecord(
        case_id=cfg.case_id, target=str(arms.target), suspect_value=arms.suspect,
        revert_value=arms.revert, rounds=cfg.rounds, workload_soak_id=soak_id,
        decision=decision, suspect=suspect, revert=revert, visits=tuple(visits),
        found=arms.found, left=left, elapsed_s=round(elapsed, 3),
        workload=workload if workload is not None else _bench_workload(cfg), load=load,
    )  # fmt: skip


def _bench_workload(cfg: CaseTestConfig) -> BenchWorkload:
    """An answers test's workload: the test and its bench (one it needs: checked up front)."""
    assert cfg.bench is not None, "an answers test needs a bench"
    return BenchWorkload(str(cfg.test), cfg.bench)


def _save(ledger: Ledger, record: ExperimentRecord) -> CaseTestOutcome:
    cid = record.case_id
    event_id = ledger.add(
        CaseEvent(at=NOW, case_id=cid, kind=ExperimentRecord.KIND, detail=encode(record))
    )
    d = record.decision
    note = f"case test {record.target}: {d.outcome} (p={d.p_value:.3g})"
    evidence_id = ledger.add(
        CaseEvidence(at=NOW, case_id=cid, kind=ExperimentRecord.KIND, ref_id=event_id, note=note)
    )
    return CaseTestOutcome(record, event_id, evidence_id)
