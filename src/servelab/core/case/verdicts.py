"""Verdicts that hold: which recorded evidence a verdict must agree with (pure).

The evidence of a case about one target, newest first:

1. **An experiment** (``case test``, :class:`~servelab.core.case.experiment.ExperimentRecord`) on
   the target that decided (convicted or exonerated), an A/B test of a slowdown
   (:class:`~servelab.core.case.abtest.AbTestRecord`) that decided, or **a bisection**
   (``case bisect``, :class:`~servelab.core.case.probe.BisectConclusion`) that gave the target a
   verdict. The newest such one is *the* evidence: a conviction it contradicts, or an exoneration
   it contradicts, is refused.
2. Without a decisive experiment, **a soak pair** among the case's soaks: one that failed with the
   knob at one value and one that passed with it at another, nothing else changed (the same
   workload — sessions, rounds, connection, think time, tokens, words, seed, idle timeout —, the
   same entry point, every other recorded knob the same). Such a pair incriminates the knob: it
   contradicts an exoneration and supports a conviction.
3. For a component (``component:proxy``, ``component:router``, ...), **a localized finding** of
   one of the case's soaks at the component's layer supports its conviction, and **a soak's
   exoneration** of that layer (the failure persisted with it bypassed:
   :mod:`servelab.core.soak.conviction`) contradicts it: the newest soak that does either
   decides, as an exonerating experiment would.

A conviction that nothing supports is refused, and so is an exoneration that incriminating
evidence contradicts; ``--override REASON`` lets either through, recorded. The codes of why are
the ``WHY_*`` strings; wording is :mod:`servelab.report.case`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from servelab.core.case.abtest import AbTestRecord
from servelab.core.case.experiment import CONVICTED, EXONERATED, INCONCLUSIVE, ExperimentRecord
from servelab.core.case.probe import BisectConclusion
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.ledger.codec import decode
from servelab.core.soak.conviction import Standing
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig

__all__ = [
    "COMPONENT_LAYERS",
    "WHY_EXPERIMENT_CONTRADICTS",
    "WHY_NO_SUPPORT",
    "WHY_SOAK_EXONERATES",
    "WHY_SOAK_PAIR_CONTRADICTS",
    "Override",
    "Refusal",
    "experiments_of",
    "incriminating_pairs",
    "refusals",
    "same_workload",
]

WHY_EXPERIMENT_CONTRADICTS = "experiment_contradicts"
WHY_SOAK_PAIR_CONTRADICTS = "soak_pair_contradicts"
WHY_NO_SUPPORT = "no_supporting_evidence"
WHY_SOAK_EXONERATES = "soak_exonerates"

#: The localization layers (:class:`~servelab.core.telemetry.layers.Layer`) naming a component.
COMPONENT_LAYERS: Mapping[str, tuple[str, ...]] = {
    "proxy": ("client_proxy",),
    "client": ("client_proxy",),
    "router": ("router",),
    "prefill": ("prefill",),
    "decode": ("decode_transfer", "engine_wedge"),
}


@dataclass(frozen=True)
class Refusal:
    """A verdict the evidence does not allow: why (``WHY_*``) and the case evidence ids."""

    target: str
    verdict: str
    why: str
    evidence_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Override:
    """Verdicts given against the evidence, with the reason someone gave (a case event's
    detail, through the codec)."""

    KIND: ClassVar[str] = "override"

    reason: str
    refused: tuple[Refusal, ...]


def experiments_of(
    events: Sequence[CaseEvent], evidence: Sequence[CaseEvidence]
) -> list[tuple[int, ExperimentRecord]]:
    """The case's experiments with the id of the evidence row that names each (oldest first)."""
    by_event = {e.ref_id: e.id for e in evidence if e.kind == ExperimentRecord.KIND}
    out: list[tuple[int, ExperimentRecord]] = []
    for event in events:
        if event.kind == ExperimentRecord.KIND and event.id in by_event:
            out.append((by_event[event.id], decode(ExperimentRecord, event.detail)))
    return out


def _decisions(
    events: Sequence[CaseEvent], evidence: Sequence[CaseEvidence]
) -> list[tuple[int, str, str]]:
    """``(evidence id, target, verdict)`` of every decisive experiment and every verdict of a
    bisection, oldest first."""
    found = [(eid, x.target, x.outcome) for eid, x in experiments_of(events, evidence)
             if x.outcome in (CONVICTED, EXONERATED)]  # fmt: skip
    by_event = {e.ref_id: e.id for e in evidence if e.kind == "bisect"}
    for event in events:
        if event.kind == BisectConclusion.KIND and event.id in by_event:
            verdicts = decode(BisectConclusion, event.detail).verdicts
            found += [(by_event[event.id], target, verdict) for target, verdict in verdicts]
    found += _ab_tests(events, evidence)
    return sorted(found, key=lambda d: d[0])


def _ab_tests(
    events: Sequence[CaseEvent], evidence: Sequence[CaseEvidence]
) -> list[tuple[int, str, str]]:
    """``(evidence id, target, verdict)`` of every decisive A/B test of a slowdown."""
    by_event = {e.ref_id: e.id for e in evidence if e.kind == AbTestRecord.KIND}
    tests = [(by_event[e.id], decode(AbTestRecord, e.detail)) for e in events
             if e.kind == AbTestRecord.KIND and e.id in by_event]  # fmt: skip
    return [(eid, t.target, t.outcome) for eid, t in tests if t.outcome != INCONCLUSIVE]


def _other_knobs(soak: SoakRunRecord, service: str, knob: str) -> dict[str, str | None]:
    knobs = dict(soak.result.config.knobs)
    knobs.pop(f"{service}/{knob}", None)
    knobs.pop(knob, None)
    return knobs


def _workload(config: SoakConfig) -> tuple[object, ...]:
    """What a soak's traffic was: sessions, rounds, connections, pace, answers, seed, idle timeout
    (not its duration, model, localization or knobs)."""
    c = config
    return (c.sessions, c.rounds, c.connection, c.think_time_s, c.max_tokens, c.turn_words,
            c.fresh_context, c.seed, c.idle_timeout_s)  # fmt: skip


def same_workload(a: SoakRunRecord, b: SoakRunRecord, service: str, knob: str) -> bool:
    """Nothing but ``service``'s ``knob`` differs between the two soaks (see the docstring)."""
    if _workload(a.result.config) != _workload(b.result.config):
        return False
    if a.result.targets.entry_url != b.result.targets.entry_url:
        return False
    return _other_knobs(a, service, knob) == _other_knobs(b, service, knob)


def incriminating_pairs(
    soaks: Sequence[tuple[int, SoakRunRecord]], service: str, knob: str
) -> list[tuple[int, int]]:
    """``(failing, passing)`` evidence ids: failed with one value, passed with another."""
    pairs: list[tuple[int, int]] = []
    for fid, failed in soaks:
        for pid, passed in soaks:
            if failed.ok is not False or passed.ok is not True:
                continue
            with_v = failed.result.config.knob(service, knob)
            without = passed.result.config.knob(service, knob)
            if with_v == without or not same_workload(failed, passed, service, knob):
                continue
            pairs.append((fid, pid))
    return pairs


def _finding_support(target: str, soaks: Sequence[tuple[int, SoakRunRecord]]) -> list[int]:
    layers = COMPONENT_LAYERS.get(target.removeprefix("component:"), ())
    return [eid for eid, s in soaks if any(f.layer in layers for f in s.result.findings)]


def _soak_exonerates(target: str, soaks: Sequence[tuple[int, SoakRunRecord]]) -> int | None:
    """The case evidence id of the newest soak that exonerated ``target``'s layer, when no
    newer one found it (None: none did)."""
    layers = COMPONENT_LAYERS.get(target.removeprefix("component:"), ())
    found = None
    for eid, s in soaks:
        cleared = s.result.exonerated
        if any(e.layer in layers and e.standing == Standing.EXONERATED for e in cleared):
            found = eid
        if any(f.layer in layers for f in s.result.findings):
            found = None
    return found


def _knob_of(target: str) -> tuple[str, str] | None:
    if not target.startswith("knob:") or "/" not in target:
        return None
    service, knob = target.removeprefix("knob:").split("/", 1)
    return service, knob


def _judge(
    target: str,
    verdict: str,
    decisions: Sequence[tuple[int, str, str]],
    soaks: Sequence[tuple[int, SoakRunRecord]],
) -> Refusal | None:
    decisive = [(i, outcome) for i, t, outcome in decisions if t == target]
    if decisive:
        eid, newest = decisive[-1]
        if newest == verdict:
            return None
        return Refusal(target, verdict, WHY_EXPERIMENT_CONTRADICTS, (eid,))
    knob = _knob_of(target)
    pairs = incriminating_pairs(soaks, *knob) if knob is not None else []
    ids = tuple(dict.fromkeys(i for pair in pairs for i in pair))
    if verdict == EXONERATED:
        return Refusal(target, verdict, WHY_SOAK_PAIR_CONTRADICTS, ids) if ids else None
    cleared = None if knob is not None else _soak_exonerates(target, soaks)
    if cleared is not None:
        return Refusal(target, verdict, WHY_SOAK_EXONERATES, (cleared,))
    support = ids if knob is not None else tuple(_finding_support(target, soaks))
    return None if support else Refusal(target, verdict, WHY_NO_SUPPORT, ())


def refusals(
    verdicts: Mapping[str, str],
    events: Sequence[CaseEvent],
    evidence: Sequence[CaseEvidence],
    soaks: Mapping[int, SoakRunRecord],
) -> list[Refusal]:
    """Every verdict of ``verdicts`` (target → exonerated|convicted) the evidence refuses.

    ``soaks``: the recorded soaks by id (those the case's evidence names are read).
    """
    decisions = _decisions(events, evidence)
    mine = [
        (e.id, soaks[e.ref_id])
        for e in evidence
        if e.kind == "soak" and e.ref_id is not None and e.ref_id in soaks
    ]
    out = []
    for target, verdict in verdicts.items():
        if verdict not in (CONVICTED, EXONERATED):
            continue
        refusal = _judge(target, verdict, decisions, mine)
        if refusal is not None:
            out.append(refusal)
    return out
