"""The typed shapes of the case commands' ``--json`` documents (pure): the words that a
revert's, a restore's, a verdict experiment's and ``case show``'s document add to their contract
(:class:`~servelab.report.document.Worded`), built by :mod:`servelab.report.case`."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.case.contract import RestoreAdvice
from servelab.core.case.model import RestoreEvent, RestoreItem, TimelineData
from servelab.core.ledger.codec import Omitted
from servelab.core.verify.contract import VerifyReport
from servelab.report.document import Worded
from servelab.report.verify import CheckDocument, VerificationWords

__all__ = [
    "ActionWords",
    "CaseWords",
    "EntryDocument",
    "EventWords",
    "ExperimentWords",
    "LeftDown",
    "NotVerified",
]


@dataclass(frozen=True)
class NotVerified:
    """The verification of a restart or verify that did not complete: not ok, no checks, its
    error."""

    ok: bool
    checks: tuple[CheckDocument, ...]
    error: str | None


@dataclass(frozen=True)
class EventWords:
    """A revert's or restore's event with whether it verified, its failed checks with their
    reasons, and its ``error`` sentence."""

    verified: bool
    failed_checks: list[CheckDocument]
    error: str | None


@dataclass(frozen=True)
class ActionWords:
    """A revert's or restore's outcome: its verification with each check's reason (or what
    stopped it), its items with theirs (a restore), and its ``error`` sentence."""

    verification: Worded[VerifyReport, VerificationWords] | NotVerified
    error: str | None
    items: Omitted[list[Worded[RestoreEvent, EventWords]]] = None


@dataclass(frozen=True)
class LeftDown:
    """What a failed restart's put-back left down, and the command that brings it back."""

    down: list[str]
    recovery: str | None


@dataclass(frozen=True)
class ExperimentWords:
    """A verdict experiment's ids and its words: the summary, the rule, the load."""

    event_id: int | None
    evidence_id: int | None
    summary: str
    rule_text: str
    load_text: str | None


@dataclass(frozen=True)
class EntryDocument:
    """A timeline entry as ``case show --json`` prints it: a recorded event's detail as stored,
    any other entry's data through the codec."""

    at: str
    kind: str
    data: TimelineData


@dataclass(frozen=True)
class CaseWords:
    """``case show --json``'s timeline, restore plan and where the restore stands."""

    timeline: list[EntryDocument]
    restore_plan: list[RestoreItem]
    restore_status: str
    #: whose each plan item's revert is, seen from the spec given, and the ``restore`` that
    #: would be accepted or why none is (the lines the text shows; absent: no plan, or no spec)
    restore_advice: Omitted[RestoreAdvice] = None
    restore_lines: Omitted[list[str]] = None
