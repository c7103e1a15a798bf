"""The steps of ``servelab investigate``, each one a call of an existing command's ops function.

Reproduce: a soak through the deployment's entry point (a hang; attached to the case), or the
answer probes at the load's concurrency against references taken at low concurrency (answers).
Localize: the soak's own localization (the replay matrix, telemetry) and verify's layers (the
knobs' layers, the P/D pair; its probe and long prompt bounded by the soak's replay matrix,
:func:`servelab.ops.verify.e2e.bounded_by`). Decide: ``case test``
(:func:`servelab.ops.case.experiment.run_case_test`) and ``case bisect``
(:func:`servelab.ops.case.bisect.run_bisect`). No wording and no printing here:
:mod:`servelab.report.investigate` words the state these steps build.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import Change
from servelab.core.case.probe import ProbeTest, ProbeTestKind
from servelab.core.deploy.putback import KnobBack
from servelab.core.investigate.state import Decided, Symptom
from servelab.core.soak.result import SoakConfig, SoakResult, Targets, WorkerTarget
from servelab.core.telemetry.layers import Layer
from servelab.io.ledger.ledger import Ledger
from servelab.ops.answers.session import AnswerSession, baseline_state
from servelab.ops.arm import Setting, make_live
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.case.answers import answers_bench, probe_answers, wrong_answers
from servelab.ops.case.bisect import BisectConfig, resume_bisect, run_bisect, unfinished
from servelab.ops.case.case import load_case
from servelab.ops.case.experiment import (
    CaseTestConfig,
    failed_sessions,
    failing_workload,
    run_case_test,
    soak_targets,
)
from servelab.ops.context import Operation
from servelab.ops.knob import get_knob, live_knobs
from servelab.ops.soak.soak import soak

__all__ = [
    "Reproduction",
    "StepConfig",
    "bisect_changes",
    "component_of",
    "good_state",
    "reproduce_answers",
    "reproduce_hang",
    "spec_targets",
    "test_target",
]


@dataclass(frozen=True)
class StepConfig:
    """How hard each step works: the reproducing soak (its sessions, rounds, idle timeout), the
    rounds of each experiment (a component's, a knob's, a bisection probe's at most, a
    slowdown's A/B), and the answers test's bench (its requests, lengths; the load's
    concurrency)."""

    soak: SoakConfig
    component_rounds: int = 1
    knob_rounds: int = 2
    bisect_rounds: int = 2
    #: a slowdown's A/B of each change: its rounds (each a visit of both values)
    slow_rounds: int = 3
    bench: BenchConfig | None = None
    answers_level: int = 64
    runs: int = 1


@dataclass(frozen=True)
class Reproduction:
    """What the symptom's test said: failed units of ``units``, the soak or the bench runs, and
    the layer its localization named (None: none, or not a soak)."""

    failed: int
    units: int
    soak_id: int | None = None
    run_ids: tuple[int, ...] = ()
    layer: str | None = None
    worker: str | None = None


def spec_targets(op: Operation) -> Targets:
    """Where the soak goes and what its localization inspects: the entry point (a proxy, else the
    router), the router, its metrics, and every prefill and decode (as ``soak -f`` builds them)."""
    spec = op.spec
    router = spec.router_name
    router_url = spec.services[router].url.rstrip("/") if router else None
    workers = tuple(
        WorkerTarget(name, svc.role, svc.url, svc.bootstrap_port)
        for name, svc in spec.services.items()
        if svc.role in ("prefill", "decode")
    )
    metrics = None
    if router and spec.services[router].start == "router" and spec.services[router].router:
        svc = spec.services[router]
        metrics = f"http://{svc.hostname}:{svc.router.prometheus_port}"  # type: ignore[union-attr]
    entry = spec.services[spec.entry_point].url.rstrip("/")
    return Targets(entry, router_url, workers, router or "router", metrics, spec.engine)


def component_of(op: Operation) -> str | None:
    """The service in front of the router a workload can bypass (None: the router is the entry)."""
    entry, router = op.spec.entry_point, op.spec.router_name
    return entry if router is not None and entry != router else None


def _top(result: SoakResult) -> tuple[str | None, str | None]:
    if not result.findings:
        return None, None
    top = result.findings[0]
    return str(top.layer), top.worker


async def reproduce_hang(
    op: Operation, ledger: Ledger, case_id: int, cfg: StepConfig
) -> Reproduction:
    """The soak through the entry point, localized, recorded and attached to the case."""
    config = dataclasses.replace(cfg.soak, knobs=await live_knobs(op), localize=True,
                                 check_determinism=False)  # fmt: skip
    result = await soak(config, spec_targets(op), progress=op.say, ledger=ledger, case_id=case_id)
    layer, worker = _top(result)
    failed = failed_sessions(result)
    return Reproduction(failed, result.sessions.count, result.soak_id, (), layer, worker)


async def reproduce_answers(op: Operation, cfg: StepConfig) -> Reproduction:
    """The answer probes at the load's level, against references taken at low concurrency on
    the deployment as it is (a setting that changes answers only under load shows here)."""
    assert cfg.bench is not None
    bench = answers_bench(cfg.bench, cfg.answers_level)
    assert bench.answers is not None
    settings = [Setting(s, k, await get_knob(op, s, k))
                for s, svc in op.spec.services.items() for k in svc.knobs]  # fmt: skip
    session = AnswerSession(bench.answers, baseline_state(op, settings), bench.model)
    await session.ensure(op)
    answers, ids, _load = await probe_answers(op, bench, cfg.runs, 0, "investigate: reproduce")
    units, failed = wrong_answers(session, answers)
    return Reproduction(failed, units, None, tuple(ids), str(Layer.CORRECTNESS), None)


def _test_of(symptom: Symptom, level: int) -> ProbeTest:
    if symptom is Symptom.ANSWERS:
        return ProbeTest(ProbeTestKind.ANSWERS, "answers", level)
    return ProbeTest()


async def test_target(
    op: Operation, ledger: Ledger, case_id: int, target: str, rounds: int, symptom: Symptom,
    cfg: StepConfig,
) -> Decided:  # fmt: skip
    """``case test`` of ``target``: its verdict, recorded on the case."""
    answers = symptom is Symptom.ANSWERS and target.startswith("knob:")
    test = _test_of(symptom if answers else Symptom.HANG, cfg.answers_level)
    bench = dataclasses.replace(cfg.bench, concurrencies=(cfg.answers_level,)) if (
        answers and cfg.bench is not None) else None  # fmt: skip
    config = CaseTestConfig(case_id, target, rounds, test=test, bench=bench, runs=cfg.runs)
    outcome = await run_case_test(op, ledger, config)
    d = outcome.record.decision
    return Decided(target, d.outcome, "case test", outcome.event_id, outcome.evidence_id,
                   d.p_value)  # fmt: skip


async def bisect_changes(
    op: Operation, ledger: Ledger, case_id: int, changes: tuple[Change, ...], symptom: Symptom,
    cfg: StepConfig,
) -> tuple[int, list[Decided]]:  # fmt: skip
    """``case bisect`` over ``changes`` (an unfinished one of the case resumed): its conclusion's
    event and the verdicts it supports (a change it did not decide: inconclusive)."""
    if unfinished(load_case(ledger, case_id)) is not None:
        outcome = await resume_bisect(op, ledger, case_id)
    else:
        bench = None
        if symptom is Symptom.ANSWERS and cfg.bench is not None:
            bench = cfg.bench
        config = BisectConfig(case_id, _test_of(symptom, cfg.answers_level), changes=changes,
                              rounds=cfg.bisect_rounds, bench=bench, runs=cfg.runs)  # fmt: skip
        outcome = await run_bisect(op, ledger, config)
    verdicts = dict(outcome.conclusion.verdicts)
    targets = [f"knob:{c.service}/{c.knob}" for c in changes]
    decided = [Decided(t, verdicts.get(t, "inconclusive"), "bisect", outcome.conclusion_id,
                       outcome.evidence_id) for t in targets]  # fmt: skip
    return outcome.bisect_id, decided


async def good_state(
    op: Operation, ledger: Ledger, case_id: int, changes: tuple[Change, ...]
) -> Reproduction:
    """The case's failing soak replayed with every change at its good value (made live, proven by
    its values), the knobs left as found after; its failed sessions."""
    _soak_id, workload = failing_workload(ledger, load_case(ledger, case_id), None)
    found = [Setting(c.service, c.knob, await get_knob(op, c.service, c.knob)) for c in changes]
    good = [Setting(c.service, c.knob, c.good) for c in changes]
    back = [KnobBack(f.service, f.knob, f.value) for f in found]
    async with as_found_on_failure(op, back):  # an arm's restart that did not come up, too
        try:
            await make_live(op, good, f"case {case_id}: investigate, the good state", e2e=False)
            config = dataclasses.replace(workload, knobs=await live_knobs(op))
            result = await soak(config, soak_targets(op), progress=op.say, ledger=ledger)
        finally:
            if [await get_knob(op, c.service, c.knob) for c in changes] != [f.value for f in found]:
                await make_live(op, found, f"case {case_id}: investigate, left as found", e2e=False)
    return Reproduction(failed_sessions(result), result.sessions.count, result.soak_id)
