"""The load an answers test reached, and the rule that a test below the load cannot clear (pure).

A fault that alters answers only in a big batch (the bf16 index keys: only over 16 running
requests on the decode) shows no wrong answer when the client never pushes the decode there, for
example a client starved of CPU. "No wrong answer" is then no evidence: the load the fault needs
was never reached. So every answers test records what it **reached** (:class:`ReachedLoad`):

- :attr:`LoadSource.ENGINE`: the decode's own running-requests gauge (SGLang
  ``sglang:num_running_reqs``, vLLM ``vllm:num_requests_running``; summed over a decode's label
  sets, the largest decode at each scrape) sampled while the runs were loaded
  (:func:`engine_load`: the scrapes between the first and the last that saw a request running);
- :attr:`LoadSource.CLIENT`: when no decode answered with that gauge, the client's own count of
  requests in flight (:func:`client_load`: the in-flight count each request met as it was sent,
  itself included) — a weaker witness: a starved client counts as in flight what it has not yet
  sent on the wire.

Its ``peak`` and ``median`` are over those samples. An arm's reached load
(:func:`arm_load`) is the least of its visits' peaks (every visit reached at least that) and the
median of their medians.

**The reference** (:class:`LoadReference`) is the load the wrong answers were seen at: the
smallest reached peak of a visit recorded on the case that saw a wrong answer with the suspect in
place — an earlier answers test's suspect arm, a ``case bisect --test answers`` probe's bad arm
(:attr:`ReferenceSource.CASE`, :func:`seen_at`); with none, :data:`REQUESTED_SHARE` of the
test's requested concurrency (:attr:`ReferenceSource.REQUESTED`): a PD decode runs fewer requests
than the client keeps in flight (the rest are in the prefill or the hand-off; 42–51 of 64 on the
simulated pair), so the whole concurrency is out of reach, while a starved client is far below
half of it.

**The rule** (:func:`guard`): a test whose suspect arm saw a wrong answer and convicted stands;
otherwise, when the suspect arm's reached peak is below the reference (or unknown), its outcome is
:data:`~servelab.core.case.experiment.NOT_SHOWN` (rule :data:`RULE_LOAD_NOT_REACHED`), never
exonerated: the load the fault needs was never reached.

**A bisection's probe** (:func:`guard_probe`) is the same rule turned round: a probe is "good"
when its arm (the good state with some of the changes) gave no wrong answer while the bad state
did, which clears those changes only if the probe's arm reached the load the bad arm's wrong
answers were seen at in the same probe (:func:`probe_reference`; with none seen yet, the case's
reference): :data:`PROBE_SHARE` of it, as a decode's peak varies from run to run (42–51 of 64 on
the simulated pair). Below it, the probe is not decided yet (it runs its next round; with none
left it is undecided). A "bad" probe (its arm failing as the bad state does) stands at any load.
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import replace

from servelab.core.case.bisect import ProbeOutcome
from servelab.core.case.experiment import (
    ARM_SUSPECT,
    CONVICTED,
    NOT_SHOWN,
    Decision,
    ExperimentVisit,
)
from servelab.core.case.probe import ARM_BAD, ARM_PROBE, ProbeRecord, ProbeVisit
from servelab.core.case.reached import (
    LoadCheck,
    LoadReference,
    LoadSource,
    ReachedLoad,
    ReferenceSource,
)
from servelab.core.case.record import CaseEvent, CaseEvidence
from servelab.core.case.verdicts import experiments_of
from servelab.core.ledger.codec import decode
from servelab.core.load.records import RequestRecord

__all__ = [
    "PROBE_SHARE",
    "REQUESTED_SHARE",
    "RULE_LOAD_NOT_REACHED",
    "arm_load",
    "case_reference",
    "check_load",
    "client_load",
    "engine_load",
    "guard",
    "guard_probe",
    "probe_reference",
    "seen_at",
]

#: The share of the requested concurrency the decode must reach when the case records no load of
#: its wrong answers (see the module's docstring).
REQUESTED_SHARE = 0.5

#: The share of the load a probe's bad arm failed at that the probe's arm must reach (a decode's
#: peak varies run to run by a few requests; a starved client stays far below).
PROBE_SHARE = 0.75

#: Why a test's outcome is "not shown" (wording in :mod:`servelab.report.case`).
RULE_LOAD_NOT_REACHED = "load_not_reached"


def _loaded(values: Sequence[float]) -> list[float]:
    """The samples from the first to the last that saw a request running."""
    busy = [i for i, v in enumerate(values) if v > 0]
    return list(values[busy[0] : busy[-1] + 1]) if busy else []


def engine_load(values: Sequence[float], series: str) -> ReachedLoad | None:
    """The reached load from the decode gauge's samples (None: no sample saw a request)."""
    loaded = _loaded(values)
    if not loaded:
        return None
    return ReachedLoad(LoadSource.ENGINE, max(loaded), statistics.median(loaded), len(loaded),
                       series)  # fmt: skip


def client_load(records: Iterable[RequestRecord]) -> ReachedLoad | None:
    """The client's in-flight count each request met as it was sent (None: nothing sent)."""
    sent = [r for r in records if r.sent_ns and not r.warmup]
    if not sent:
        return None
    sends = sorted(r.sent_ns for r in sent)
    ends = sorted(r.end_ns for r in sent if r.end_ns is not None)
    # at equal times an end comes first: a slot's next send follows its previous request's end
    met = [bisect_right(sends, r.sent_ns) - bisect_right(ends, r.sent_ns) for r in sent]
    return ReachedLoad(LoadSource.CLIENT, float(max(met)), float(statistics.median(met)),
                       len(met))  # fmt: skip


def arm_load(visits: Sequence[ExperimentVisit | ProbeVisit], arm: str) -> ReachedLoad | None:
    """``arm``'s reached load: the least peak of its visits, the median of their medians (None
    when a visit of it recorded none: its load is unknown)."""
    loads = [v.reached for v in visits if v.arm == arm]
    known = [r for r in loads if r is not None]
    if not loads or len(known) < len(loads):
        return None
    source = LoadSource.ENGINE if all(r.source is LoadSource.ENGINE for r in known) else (
        LoadSource.CLIENT)  # fmt: skip
    series = known[0].series if source is LoadSource.ENGINE else ""
    return ReachedLoad(source, min(r.peak for r in known),
                       statistics.median(r.median for r in known),
                       sum(r.samples for r in known), series)  # fmt: skip


def _seen(visits: Sequence[ExperimentVisit | ProbeVisit], arm: str) -> list[float]:
    """The reached peaks of ``arm``'s visits that saw a wrong answer (a failed unit)."""
    return [v.reached.peak for v in visits
            if v.arm == arm and v.failed > 0 and v.reached is not None]  # fmt: skip


def seen_at(
    events: Sequence[CaseEvent], evidence: Sequence[CaseEvidence]
) -> list[tuple[float, int]]:
    """``(reached peak, evidence id)`` of every recorded visit that saw the wrong answers with the
    suspect in place: an answers test's suspect arm, a bisection probe's bad arm."""
    seen = [(peak, eid) for eid, x in experiments_of(events, evidence)
            for peak in _seen(x.visits, ARM_SUSPECT)]  # fmt: skip
    probes = {e.ref_id: e.id for e in evidence if e.kind == ProbeRecord.KIND}
    for event in events:
        if event.kind == ProbeRecord.KIND and event.id in probes:
            probe = decode(ProbeRecord, event.detail)
            seen += [(peak, probes[event.id]) for peak in _seen(probe.visits, ARM_BAD)]
    return seen


def case_reference(
    events: Sequence[CaseEvent], evidence: Sequence[CaseEvidence], requested: int
) -> LoadReference:
    """The load the case's wrong answers were seen at: the least of :func:`seen_at` (the
    evidence that saw it); else :data:`REQUESTED_SHARE` of ``requested``."""
    seen = seen_at(events, evidence)
    if not seen:
        return LoadReference(requested * REQUESTED_SHARE, ReferenceSource.REQUESTED)
    level, eid = min(seen)
    return LoadReference(level, ReferenceSource.CASE, eid)


def check_load(reached: ReachedLoad | None, reference: LoadReference) -> LoadCheck:
    """Whether ``reached`` (the suspect arm's) is at least the reference (unknown: not)."""
    return LoadCheck(reached, reference, reached is not None and reached.peak >= reference.level)


def guard(decision: Decision, check: LoadCheck) -> Decision:
    """``decision`` unless it did not convict and the load was not reached: then not shown."""
    if decision.outcome == CONVICTED or check.enough:
        return decision
    return replace(decision, outcome=NOT_SHOWN, rule=RULE_LOAD_NOT_REACHED)


def probe_reference(visits: Sequence[ProbeVisit], fallback: LoadReference) -> LoadReference:
    """The load a probe's bad arm saw its wrong answers at: the least reached peak of its visits
    that failed (:attr:`ReferenceSource.PROBE`); ``fallback`` while none did."""
    seen = _seen(visits, ARM_BAD)
    return LoadReference(min(seen), ReferenceSource.PROBE) if seen else fallback


def guard_probe(
    outcome: ProbeOutcome | None,
    decision: Decision,
    visits: Sequence[ProbeVisit],
    fallback: LoadReference,
) -> tuple[ProbeOutcome | None, Decision, LoadCheck]:
    """A probe's outcome after a round, unless it is "good" and the probe's arm did not reach
    :func:`probe_reference` (:data:`PROBE_SHARE` of it when the bad arm failed in this probe):
    then not decided yet, the decision's rule
    :data:`RULE_LOAD_NOT_REACHED`. The load check is returned either way."""
    reference, reached = probe_reference(visits, fallback), arm_load(visits, ARM_PROBE)
    check = check_load(reached, reference)
    if reference.source is ReferenceSource.PROBE:
        check = replace(check, enough=reached is not None
                        and reached.peak >= PROBE_SHARE * reference.level)  # fmt: skip
    if outcome is not ProbeOutcome.GOOD or check.enough:
        return outcome, decision, check
    return None, replace(decision, rule=RULE_LOAD_NOT_REACHED), check
