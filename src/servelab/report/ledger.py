"""``servelab ledger export``'s document: every record, each check with its reason (no I/O).

The ledger stores a check's outcome code and data (:mod:`servelab.core.checks`); the export a person
reads says why as well: every verification's checks, a ``restart``'s verification in its deployment
row, and a revert's or restore's failed checks get their ``detail`` sentence
(:func:`servelab.report.verify.check_detail`), and a failed revert or restore its ``error``
(:func:`servelab.report.case.event_error`). Rows from older ledgers keep the sentences they stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servelab.core.evidence import LedgerExport
from servelab.report.case import event_error
from servelab.report.verify import with_details

__all__ = ["ledger_json"]

_CASE_ACTIONS = ("revert", "restore")


def _verification(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {**doc, "checks": with_details(doc.get("checks"))}


def _deployment(row: dict[str, Any]) -> dict[str, Any]:
    detail = row.get("detail")
    verification = detail.get("verification") if isinstance(detail, Mapping) else None
    if not isinstance(detail, Mapping) or not isinstance(verification, Mapping):
        return row
    return {**row, "detail": {**detail, "verification": _verification(verification)}}


def _event(row: dict[str, Any]) -> dict[str, Any]:
    detail = row.get("detail")
    if row.get("kind") not in _CASE_ACTIONS or not isinstance(detail, Mapping):
        return row
    shown = {**detail, "error": event_error(detail)}
    if "failed_checks" in detail:
        shown["failed_checks"] = with_details(detail.get("failed_checks"))
    return {**row, "detail": shown}


def ledger_json(export: LedgerExport) -> dict[str, Any]:
    """The export as JSON, with every check's reason and every failed revert's or restore's."""
    doc = export.to_json()
    doc["deployments"] = [_deployment(row) for row in doc["deployments"]]
    doc["verifications"] = [_verification(row) for row in doc["verifications"]]
    doc["cases"] = [
        {**case, "events": [_event(event) for event in case["events"]]} for case in doc["cases"]
    ]
    return doc
