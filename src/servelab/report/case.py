"""Why a revert or a restore did not verify, in words, and their ``--json`` documents (no I/O).

:mod:`servelab.ops.case.case` returns the failure as data: the message of a restart or verify that
did not complete (``failure``), else the verification's failed checks; the case event it records
holds the same (``error``, ``failed_checks``). Here they become one sentence: the message, else
``LAYER SERVICE: reason`` per failed check (:func:`servelab.report.verify.check_detail`), else
that the knob's live value was not confirmed. An older ledger's event stored that sentence as its
``error``; it reads as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servelab.core.case.experiment import (
    RULE_BOUND,
    RULE_NEITHER,
    RULE_NOT_REPRODUCED,
    RULE_SIGNIFICANT,
    ArmTally,
    Decision,
    ExperimentRecord,
)
from servelab.core.case.verdicts import (
    WHY_EXPERIMENT_CONTRADICTS,
    WHY_NO_SUPPORT,
    WHY_SOAK_PAIR_CONTRADICTS,
    Override,
    Refusal,
)
from servelab.core.ledger.evidence import CheckRecord
from servelab.core.ledger.jsonvalues import objs, opt_str
from servelab.core.verify.checks import read_check
from servelab.ops.case.case import RestoreOutcome, RevertOutcome
from servelab.ops.case.experiment import CaseTestOutcome
from servelab.ops.verify.verify import VerifyReport
from servelab.report.text import show_value
from servelab.report.verify import check_detail, with_details

__all__ = [
    "NOT_CONFIRMED",
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


def revert_error(outcome: RevertOutcome) -> str | None:
    """Why the revert did not verify (None: it did)."""
    return None if outcome.ok else _reasons(outcome.failed_checks, outcome.failure)


def restore_error(outcome: RestoreOutcome) -> str | None:
    """Why the restore did not verify (None: it did)."""
    return None if outcome.ok else _reasons(outcome.failed_checks, outcome.failure)


def event_error(detail: Mapping[str, Any]) -> str | None:
    """Why a recorded revert or restore event did not verify (None: it did), from its detail."""
    if detail.get("ok"):
        return None
    failed = [read_check(c) for c in objs(detail.get("failed_checks"))]
    return _reasons(failed, opt_str(detail.get("error")))


def _with_reasons(verification: Mapping[str, Any]) -> dict[str, Any]:
    return {**verification, "checks": with_details(verification.get("checks"))}


def _event_json(event: Mapping[str, Any]) -> dict[str, Any]:
    """A case event's JSON with its ``error`` sentence and its failed checks' reasons."""
    failed = with_details(event.get("failed_checks"))
    return {**event, "failed_checks": failed, "error": event_error(event)}


def revert_json(outcome: RevertOutcome) -> dict[str, Any]:
    """``case revert --json``: the outcome, each check's reason and the ``error`` sentence."""
    doc = outcome.to_json()
    doc["verification"] = _with_reasons(doc["verification"])
    doc["error"] = revert_error(outcome)
    return doc


def restore_json(outcome: RestoreOutcome) -> dict[str, Any]:
    """``restore --json``: the outcome, each check's and each item's reason, the ``error``."""
    doc = outcome.to_json()
    doc["items"] = [_event_json(item) for item in doc["items"]]
    doc["verification"] = _with_reasons(doc["verification"])
    doc["error"] = restore_error(outcome)
    return doc


# -- the verdict experiment (``case test``) and verdicts that hold ---------------------------------

_RULES = {
    RULE_SIGNIFICANT: "p < α and the failure rate drops with the revert",
    RULE_BOUND: "the interval's upper bound is below the meaningful effect δ",
    RULE_NOT_REPRODUCED: "the failure did not reproduce with the suspect in place",
    RULE_NEITHER: "neither significant nor bounded below the meaningful effect",
}

_WHY = {
    WHY_EXPERIMENT_CONTRADICTS: "the case's newest decisive experiment says otherwise",
    WHY_SOAK_PAIR_CONTRADICTS: "a soak failed with one value and passed with another, "
    "nothing else changed",
    WHY_NO_SUPPORT: "no recorded evidence supports it",
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
    return (
        f"case test {record.target}: {d.outcome.upper()} — suspect "
        f"{show_value(record.suspect_value)}: {_arm(record.suspect)}; revert "
        f"{show_value(record.revert_value)}: {_arm(record.revert)}; p = {d.p_value:.3g}, "
        f"difference {d.difference:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    )


def experiment_lines(record: ExperimentRecord) -> list[str]:
    """The experiment as ``case test`` prints it: visits, the statistic, the rule."""
    d = record.decision
    lines = [
        f"  visit {i + 1}: arm {v.arm} {show_value(v.value)}: {v.failed}/{v.sessions} failed"
        + (f" (soak #{v.soak_id})" if v.soak_id is not None else "")
        + f", {v.elapsed_s:.1f} s"
        for i, v in enumerate(record.visits)
    ]
    lines += [
        f"  test: {d.test}; p = {d.p_value:.3g} (α = {d.alpha:g})",
        f"  interval: {d.interval_name}, {d.confidence:.0%}: "
        f"[{d.interval[0]:+.2f}, {d.interval[1]:+.2f}] (δ = {d.effect:g})",
        f"  rule: {d.outcome} because {_RULES.get(d.rule, d.rule)}",
    ]
    if record.found is not None or record.left is not None:
        lines.append(f"  knob left as found: {show_value(record.left)}")
    lines.append(f"  took {record.elapsed_s:.1f} s")
    return lines


def experiment_json(outcome: CaseTestOutcome) -> dict[str, Any]:
    """``case test --json``: the record, its ids, and the rule in words."""
    doc = outcome.to_json()
    doc["summary"] = describe_experiment(outcome.record)
    doc["rule_text"] = _RULES.get(outcome.record.decision.rule, outcome.record.decision.rule)
    return doc


def describe_refusal(refusal: Refusal) -> str:
    """Why a verdict was refused, naming the evidence ids."""
    ids = ", ".join(f"#{i}" for i in refusal.evidence_ids)
    tail = f" (evidence {ids})" if ids else ""
    return f"{refusal.target} {refusal.verdict}: {_WHY.get(refusal.why, refusal.why)}{tail}"


def describe_override(detail: Mapping[str, Any]) -> str:
    """An ``override`` case event: the reason and what the evidence said."""
    refused = [
        describe_refusal(Refusal(str(r.get("target")), str(r.get("verdict")), str(r.get("why")),
                                 tuple(int(i) for i in r.get("evidence_ids") or ())))
        for r in objs(detail.get("refused"))
    ]  # fmt: skip
    return f"{Override.KIND}: {detail.get('reason')} — against the evidence: " + "; ".join(refused)
