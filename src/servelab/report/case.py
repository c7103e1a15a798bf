"""Why a revert or a restore did not verify, in words, and their ``--json`` documents (no I/O).

:mod:`servelab.ops.case` returns the failure as data: the message of a restart or verify that did
not complete (``failure``), else the verification's failed checks; the case event it records holds
the same (``error``, ``failed_checks``). Here they become one sentence: the message, else
``LAYER SERVICE: reason`` per failed check (:func:`servelab.report.verify.check_detail`), else
that the knob's live value was not confirmed. An older ledger's event stored that sentence as its
``error``; it reads as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servelab.core.evidence import CheckRecord
from servelab.core.jsonvalues import objs, opt_str
from servelab.ops.case import RestoreOutcome, RevertOutcome
from servelab.ops.verify import Check, VerifyReport
from servelab.report.verify import check_detail, with_details

__all__ = [
    "NOT_CONFIRMED",
    "event_error",
    "restore_error",
    "restore_json",
    "revert_error",
    "revert_json",
    "why_failed",
]

#: Why a revert or restore failed when no check failed and nothing else went wrong.
NOT_CONFIRMED = "the knob's live value was not confirmed"


def _reasons(failed: Sequence[Check | CheckRecord], failure: str | None) -> str:
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
    failed = [CheckRecord.from_json(c) for c in objs(detail.get("failed_checks"))]
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
