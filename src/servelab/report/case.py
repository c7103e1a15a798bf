"""Why a revert or a restore did not verify, in words, and their ``--json`` documents; the words of
a verdict experiment (``case test``) and of a bisection (``case bisect``) (no I/O).

:mod:`servelab.ops.case.case` returns the failure as data: the message of a restart or verify that
did not complete (``failure``), else the verification's failed checks; the case event it records
holds the same (``error``, ``failed_checks``). Here they become one sentence: the message, else
``LAYER SERVICE: reason`` per failed check (:func:`servelab.report.verify.check_detail`), else
that the knob's live value was not confirmed. An older ledger's event stored that sentence as its
``error``; it reads as it is.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, assert_never

from servelab.core.case.bisect import Bisected, Change, ProbeOutcome
from servelab.core.case.contract import RestoreAdvice, RestoreOutcome, RevertOutcome
from servelab.core.case.experiment import (
    RULE_BOUND,
    RULE_NEITHER,
    RULE_NOT_PERSISTED,
    RULE_NOT_REPRODUCED,
    RULE_SIGNIFICANT,
    ArmTally,
    Decision,
    ExperimentRecord,
)
from servelab.core.case.load import RULE_LOAD_NOT_REACHED
from servelab.core.case.model import (
    EventOutcome,
    RestoreEvent,
    RevertEvent,
)
from servelab.core.case.probe import (
    BisectConclusion,
    BisectRecord,
    ProbeRecord,
    change_target,
)
from servelab.core.case.verdicts import (
    WHY_EXPERIMENT_CONTRADICTS,
    WHY_NO_SUPPORT,
    WHY_SOAK_EXONERATES,
    WHY_SOAK_PAIR_CONTRADICTS,
    Override,
    Refusal,
)
from servelab.core.ledger.codec import encode
from servelab.core.redaction import mask
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.record import CheckRecord
from servelab.report.casedocument import (
    ActionWords,
    CaseWords,
    EntryDocument,
    EventWords,
    ExperimentWords,
    LeftDown,
    NotVerified,
)
from servelab.report.caseload import LOAD_RULE, describe_load, load_clause, probe_load
from servelab.report.document import Worded, document_text
from servelab.report.jsontext import json_text
from servelab.report.putback import after_failure
from servelab.report.text import show_value
from servelab.report.verify import (
    VerificationWords,
    check_detail,
    check_document,
    verification_document,
)

if TYPE_CHECKING:  # only annotations: the ops machinery (aiohttp with it) is not imported to word
    from servelab.ops.case.bisect import BisectOutcome
    from servelab.ops.case.case import CaseView
    from servelab.ops.case.experiment import CaseTestOutcome

__all__ = [
    "NOT_CONFIRMED",
    "bisect_json",
    "bisect_lines",
    "case_json",
    "case_list_json",
    "describe_bisect_event",
    "describe_bisected",
    "describe_evidence",
    "describe_experiment",
    "describe_override",
    "describe_refusal",
    "event_error",
    "experiment_json",
    "experiment_lines",
    "restore_error",
    "restore_json",
    "revert_error",
    "revert_json",
    "revert_lines",
    "why_failed",
]

#: Why a revert or restore failed when no check failed and nothing else went wrong.
NOT_CONFIRMED = "the knob's live value was not confirmed"


def _reasons(failed: Sequence[CheckRecord], failure: str | None) -> str:
    if failure:
        return failure
    reasons = [f"{c.layer} {c.service}: {check_detail(c)}" for c in failed]
    return "; ".join(reasons) or NOT_CONFIRMED


def why_failed(verification: VerifyReport | None, failure: str | None = None) -> str:
    """Why a verification failed: the restart's or verify's error, else each failed check."""
    return _reasons(verification.failures if verification is not None else [], failure)


def _put_back(outcome: RevertOutcome | RestoreOutcome) -> str:
    """``; `` and what putting the knobs back after a failed restart did (empty: no put-back)."""
    return "" if outcome.put_back is None else f"; {after_failure(outcome.put_back)}"


def revert_error(outcome: RevertOutcome) -> str | None:
    """Why the revert did not verify (None: it did), and what a failed restart's put-back did."""
    if outcome.ok:
        return None
    return _reasons(outcome.failed_checks, outcome.failure) + _put_back(outcome)


def revert_lines(outcome: RevertOutcome) -> list[str]:
    """``case revert``'s last lines, in the order things happened: reverted and verified, or
    not; a restart that failed, then what was put back and whether that is verified."""
    preview = outcome.preview  # SERVICE:NAME, as --change/--knob take it
    what = f"{preview.service}:{preview.knob} → {preview.revert_to}"
    if outcome.ok:
        return [f"reverted {what}: verified live"]
    if outcome.put_back is None:
        return [f"reverted {what}: NOT verified: {revert_error(outcome)}"]
    failed = _reasons(outcome.failed_checks, outcome.failure)
    return [f"revert of {what} failed: {failed}", f"then {after_failure(outcome.put_back)}"]


def restore_error(outcome: RestoreOutcome) -> str | None:
    """Why the restore did not verify (None: it did), and what a failed restart's put-back did."""
    if outcome.ok:
        return None
    return _reasons(outcome.failed_checks, outcome.failure) + _put_back(outcome)


def _left(outcome: RevertOutcome | RestoreOutcome) -> tuple[list[str], str | None] | None:
    """The services a failed restart's put-back left down and the command that brings them back
    (one shell line, or None), for the ``--json`` document's ``down`` and ``recovery`` as an
    interrupted command's failure document has them; None: no put-back ran."""
    put = outcome.put_back
    if put is None:
        return None
    return list(put.down), shlex.join(put.recovery) if put.recovery else None


def event_error(event: EventOutcome | RevertEvent | RestoreEvent) -> str | None:
    """Why a revert or restore event did not verify (None: it did); a recorded one's detail reads
    as an :class:`~servelab.core.case.model.EventOutcome`."""
    return None if event.ok else _reasons(event.failed, event.error)


def _verification(
    verification: VerifyReport | None, failure: str | None
) -> Worded[VerifyReport, VerificationWords] | NotVerified:
    """The verification as ``--json`` shows it, each check with its reason (a restart or verify
    that did not complete: not ok, no checks, its error)."""
    if verification is None:
        return NotVerified(False, (), failure)
    return verification_document(verification)


def _event(event: RestoreEvent) -> Worded[RestoreEvent, EventWords]:
    """A restore item's JSON with whether it verified, its failed checks' reasons and its
    ``error`` sentence."""
    failed = [check_document(c) for c in event.failed]
    return Worded(event, EventWords(event.ok, failed, event_error(event)))


def _head(outcome: RevertOutcome | RestoreOutcome) -> LeftDown | None:
    left = _left(outcome)
    return None if left is None else LeftDown(*left)


def case_json(
    view: CaseView, advice: RestoreAdvice | None = None, lines: list[str] | None = None
) -> str:
    """``case show --json`` (and ``case resolve --json``): the case, its timeline (each entry's
    data as recorded), its restore plan and where the restore stands; with ``advice`` (a plan,
    seen from the spec given) whose each revert is, and ``lines``, the text's lines of it
    (:func:`~servelab.report.docs.restore_plan_lines`, then the restore hint)."""
    timeline = [EntryDocument(e.at, e.kind, e.data) for e in view.timeline]
    words = CaseWords(timeline, list(view.plan), view.restore_status, advice, lines)
    return document_text(Worded(view.case, words))


def case_list_json(views: Sequence[CaseView]) -> str:
    """``case list --json``: each case's id, title, status, root cause, when it was opened and
    where its restore stands."""
    return json_text([
        {"id": v.case.id, "title": v.case.title, "status": v.case.status,
         "root_cause": v.case.root_cause, "opened_at": v.case.opened_at,
         "restore_status": v.restore_status}
        for v in views
    ])  # fmt: skip


def revert_json(outcome: RevertOutcome) -> str:
    """``case revert --json``: the outcome, each check's reason and the ``error`` sentence."""
    words = ActionWords(_verification(outcome.verification, outcome.failure), revert_error(outcome))
    return document_text(Worded(outcome, words, head=_head(outcome)))


def restore_json(outcome: RestoreOutcome) -> str:
    """``restore --json``: the outcome, each check's and each item's reason, the ``error``."""
    verification = _verification(outcome.verification, outcome.failure)
    items = [_event(item) for item in outcome.items]
    words = ActionWords(verification, restore_error(outcome), items)
    return document_text(Worded(outcome, words, head=_head(outcome)))


# -- the verdict experiment (``case test``) and verdicts that hold ---------------------------------

_RULES = {
    RULE_SIGNIFICANT: "p < α and the failure rate drops with the revert",
    RULE_BOUND: "the interval's upper bound is below the meaningful effect δ",
    RULE_NOT_REPRODUCED: "the failure did not reproduce with the suspect in place",
    RULE_NOT_PERSISTED: "the revert arm never failed: reverting may have cured a failure too "
    "rare to bound",
    RULE_NEITHER: "neither significant nor bounded below the meaningful effect",
    RULE_LOAD_NOT_REACHED: LOAD_RULE,
}

_WHY = {
    WHY_EXPERIMENT_CONTRADICTS: "the case's newest decisive experiment says otherwise",
    WHY_SOAK_PAIR_CONTRADICTS: "a soak failed with one value and passed with another, "
    "nothing else changed",
    WHY_NO_SUPPORT: "no recorded evidence supports it",
    WHY_SOAK_EXONERATES: "a soak exonerated it: the failure persisted with it bypassed",
}


def _arm(arm: ArmTally) -> str:
    rate = "n/a" if arm.rate is None else f"{arm.rate:.0%}"
    return f"{arm.failed}/{arm.sessions} sessions failed ({rate})"


def describe_evidence(kind: Any, ref_id: Any) -> str:
    """A piece of a case's evidence as its timeline lists it (``evidence: experiment #2``), and
    as a command that attached it says so (``case test``: the same kind and id)."""
    return f"evidence: {kind} #{ref_id}"


def describe_experiment(record: ExperimentRecord) -> str:
    """One line: the outcome, the arms, the p-value and the interval."""
    d: Decision = record.decision
    lo, hi = d.interval
    load = f"; {load_clause(record.load)}" if record.load is not None else ""
    return (
        f"case test {record.target}: {d.outcome.replace('_', ' ').upper()} — suspect "
        f"{show_value(record.suspect_value)}: {_arm(record.suspect)}; revert "
        f"{show_value(record.revert_value)}: {_arm(record.revert)}; p = {d.p_value:.3g}, "
        f"difference {d.difference:+.2f} [{lo:+.2f}, {hi:+.2f}]{load}"
    )


def experiment_lines(record: ExperimentRecord) -> list[str]:
    """The experiment as ``case test`` prints it: visits, the statistic, the rule."""
    d = record.decision
    lines = [
        f"  visit {i + 1}: arm {v.arm} {show_value(v.value)}: {v.failed}/{v.sessions} failed"
        + (f" (soak #{v.soak_id})" if v.soak_id is not None else "")
        + (f", load {v.reached.peak:g}" if v.reached is not None else "")
        + f", {v.elapsed_s:.1f} s"
        for i, v in enumerate(record.visits)
    ]
    lines += [
        f"  test: {d.test}; p = {d.p_value:.3g} (α = {d.alpha:g})",
        f"  interval: {d.interval_name}, {d.confidence:.0%}: "
        f"[{d.interval[0]:+.2f}, {d.interval[1]:+.2f}] (δ = {d.effect:g})",
        f"  rule: {d.outcome} because {_RULES.get(d.rule, d.rule)}",
    ]
    if record.load is not None:
        lines.append(f"  load: {describe_load(record.load, d)}")
    if record.found is not None or record.left is not None:
        lines.append(f"  knob left as found: {show_value(record.left)}")
    lines.append(f"  took {record.elapsed_s:.1f} s")
    return lines


def experiment_json(outcome: CaseTestOutcome) -> str:
    """``case test --json``: the record, its ids, and the rule in words."""
    record = outcome.record
    load = record.load
    words = ExperimentWords(
        outcome.event_id, outcome.evidence_id, describe_experiment(record),
        _RULES.get(record.decision.rule, record.decision.rule),
        describe_load(load, record.decision) if load is not None else None,
    )  # fmt: skip
    return document_text(Worded(record, words))


def describe_refusal(refusal: Refusal) -> str:
    """Why a verdict was refused, naming the evidence ids."""
    ids = ", ".join(f"#{i}" for i in refusal.evidence_ids)
    tail = f" (evidence {ids})" if ids else ""
    return f"{refusal.target} {refusal.verdict}: {_WHY.get(refusal.why, refusal.why)}{tail}"


def describe_override(override: Override) -> str:
    """An ``override`` case event: the reason and what the evidence said."""
    refused = "; ".join(describe_refusal(r) for r in override.refused)
    return f"{Override.KIND}: {override.reason} — against the evidence: {refused}"


# -- a bisection (``case bisect``) ---------------------------------------------------------------


def _change(change: Change) -> str:
    good, bad = (show_value(mask(change.knob, v)) for v in (change.good, change.bad))
    return f"{change.service} {change.knob} {good} → {bad}"


def _named(change: Change) -> str:
    """A change's knob with its service (``decode:KNOB``): two services may have a knob of one
    name, and the ledger knows whose each change is."""
    return f"{change.service}:{change.knob}"


def _applied(changes: tuple[Change, ...], indices: tuple[int, ...]) -> str:
    picked = [f"{_named(changes[i])}={show_value(mask(changes[i].knob, changes[i].bad))}"
              for i in indices]  # fmt: skip
    return ", ".join(picked) or "no change"


def _probe_line(record: ProbeRecord, changes: tuple[Change, ...]) -> str:
    load = "" if record.load is None else f"; {probe_load(record.load)}"
    return (
        f"  probe {record.number}: the good state with {_applied(changes, record.changes)}: "
        f"{record.outcome.upper()} after {record.rounds} round(s) — {_arm(record.probe)} with "
        f"it, {_arm(record.bad)} in the bad state; p = {record.decision.p_value:.3g}{load}"
    )


def _found(result: Bisected) -> str:
    """The bisection's finding in a few words: ``guilty`` the changes, only when the result is
    shown 1-minimal; else ``not proven`` and which changes were not shown needed."""
    guilty = "; ".join(_change(c) for c in result.changes) or "none"
    if result.minimal:
        return f"guilty {guilty}"
    unproven = ", ".join(_named(result.changes[result.indices.index(i)]) for i in result.unproven
                         if i in result.indices)  # fmt: skip
    return (
        f"not proven: bad with {guilty}, but {unproven} not shown needed (removing it was "
        "undecided)"
    )


def _not_found(conclusion: BisectConclusion) -> str | None:
    """Why nothing is guilty when the good state's probe was not good (None: it was)."""
    if conclusion.result.good_state is ProbeOutcome.GOOD:
        return None
    if conclusion.result.good_state is ProbeOutcome.BAD:
        return "fails without any of the changes: not these changes (nothing convicted)"
    if conclusion.reproduced is False:
        return "did not reproduce: the bad state never failed the test (nothing convicted)"
    return (
        "not proven: the bad state was not shown to fail more than the good state (its probe "
        "undecided; nothing convicted)"
    )


def describe_bisected(start: BisectRecord, conclusion: BisectConclusion) -> str:
    """One line: the guilty changes (or, not shown 1-minimal, "not proven"; the good state not
    probed good, why nothing is guilty) and what finding them took."""
    result = conclusion.result
    why = _not_found(conclusion)
    if why is not None:
        return (
            f"case bisect: {why}, after {result.probes} probe(s) over {len(start.changes)} "
            f"change(s) ({conclusion.visits} visits, {conclusion.elapsed_s:.0f} s)"
        )
    shown = "1-minimal" if result.minimal else "not shown minimal: an undecided probe"
    return (
        f"case bisect: {_found(result)} ({shown}), found in {result.probes} "
        "probe(s) over "
        f"{len(start.changes)} change(s) ({conclusion.visits} visits, "
        f"{conclusion.elapsed_s:.0f} s)"
    )


def bisect_lines(outcome: BisectOutcome) -> list[str]:
    """The bisection as ``case bisect`` prints it: the changes, each probe, the method, the
    verdicts and how to resolve with them."""
    start, conclusion = outcome.start, outcome.conclusion
    lines = [f"  changes ({start.good or 'listed'} → {start.bad or 'listed'}):"]
    lines += [f"    {i + 1}. {_change(c)}" for i, c in enumerate(start.changes)]
    lines += [_probe_line(p, start.changes) for p in outcome.probes]
    unproven = [change_target(start.changes[i]) for i in conclusion.result.unproven]
    if unproven:
        lines.append(f"  not shown needed (their removal was undecided): {', '.join(unproven)}")
    d = outcome.probes[-1].decision if outcome.probes else Decision()
    lines += [
        f"  method: {conclusion.result.method}; each probe against the bad state by "
        f"{d.test}, at most {start.rounds} round(s), each look at α/{start.rounds} "
        f"(α = {start.alpha:g}, δ = {start.effect:g}); test {start.test}",
    ]
    verdicts = [f"{target} {verdict}" for target, verdict in conclusion.verdicts]
    lines.append(f"  verdicts: {'; '.join(verdicts) or 'none'}")
    convict = [t for t, v in conclusion.verdicts if v == "convicted"]
    exonerate = [t for t, v in conclusion.verdicts if v == "exonerated"]
    if convict or exonerate:
        flags = [f"--convict {t}" for t in convict] + [f"--exonerate {t}" for t in exonerate]
        lines.append(
            f"  resolve with: servelab case resolve {start.case_id} --root-cause ... "
            + " ".join(flags)
        )
    return lines


def bisect_json(outcome: BisectOutcome) -> str:
    """``case bisect --json``: the records, their ids, and the result in words."""
    summary = describe_bisected(outcome.start, outcome.conclusion)
    return json_text({**encode(outcome), "summary": summary})


def describe_bisect_event(event: BisectRecord | ProbeRecord | BisectConclusion) -> str:
    """A bisection's case event (``bisect``, ``probe``, ``bisected``) in the case's timeline."""
    match event:
        case BisectRecord() as start:
            changes = "; ".join(_change(c) for c in start.changes)
            return f"bisect started: {len(start.changes)} change(s), test {start.test}: {changes}"
        case ProbeRecord() as probe:
            applied = ", ".join(str(i + 1) for i in probe.changes) or "none"
            return (
                f"bisect probe {probe.number}: changes {applied} applied: {probe.outcome.upper()} "
                f"after {probe.rounds} round(s), p = {probe.decision.p_value:.3g}"
            )
        case BisectConclusion() as end:
            return (
                f"bisected: {_not_found(end) or _found(end.result)} in {end.result.probes} probe(s)"
            )
        case _:
            assert_never(event)
