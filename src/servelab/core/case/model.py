"""The case model: suspects, evidence, verdicts, timelines, and restore plans.

Pure: it reads the typed records of :mod:`servelab.core.case.record` and its features' (as
:mod:`servelab.io.ledger.ledger` returns them) and returns data. Wording lives in
:mod:`servelab.report.docs`.

A *target* is what a case suspects: ``knob:SERVICE/NAME`` or ``component:NAME``. A knob reverted
under a case is a knob change recorded with that case's id. When the case is resolved and the knob's
target is exonerated, every such change comes back as a :class:`RestoreItem` whose cost is read from
recorded A/B experiments.

What a revert costs and what would convict the knob: :mod:`servelab.core.case.revert`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field

from servelab.core.ab.record import AbRunRecord
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord, Resolution, Suspect
from servelab.core.case.revert import ConcurrencyCost, RevertCost, revert_cost
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import Omitted, decode
from servelab.core.redaction import redact
from servelab.core.verify.record import StoredCheck
from servelab.errors import CaseError

__all__ = [
    "CASE_RESOLVED",
    "CONVICTED",
    "EXONERATED",
    "RESTORE_FAILED",
    "RESTORE_NONE",
    "RESTORE_PENDING",
    "RESTORE_UNRESOLVED",
    "RESTORE_VERIFIED",
    "Case",
    "EventOutcome",
    "EvidenceAdded",
    "KnobChanged",
    "Opened",
    "RestoreEvent",
    "RestoreItem",
    "RevertEvent",
    "Suspected",
    "Target",
    "TimelineData",
    "TimelineEntry",
    "case_from_rows",
    "check_verdicts",
    "parse_target",
    "restore_plan",
    "restore_status",
    "revert_changes",
    "timeline",
]

CASE_RESOLVED = "resolved"
EXONERATED = "exonerated"
CONVICTED = "convicted"

RESTORE_UNRESOLVED = "case not resolved"
RESTORE_NONE = "nothing to restore"
RESTORE_PENDING = "restore pending"
RESTORE_FAILED = "restore failed"
RESTORE_VERIFIED = "restored and verified"

_TARGET = re.compile(
    r"^(?:knob:(?P<svc>[\w.-]+)/(?P<knob>[A-Za-z_]\w*|--[A-Za-z0-9][\w.-]*)"
    r"|component:(?P<comp>[\w.-]+))$"
)


# -- targets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """``knob:SERVICE/NAME`` (``service`` set) or ``component:NAME`` (``service`` None)."""

    kind: Literal["knob", "component"]
    name: str
    service: str | None = None

    def __str__(self) -> str:
        if self.kind == "knob":
            return f"knob:{self.service}/{self.name}"
        return f"component:{self.name}"


#: The longest target: a knob's or a component's name is a name, not a text.
LONGEST_TARGET = 200


def parse_target(text: str) -> Target:
    """Parse a target; :class:`CaseError` names the two accepted forms. A target is stored and
    shown as it is, so one over :data:`LONGEST_TARGET` characters, or one the redaction policy
    would mask (a token as a component's name), is refused without being echoed."""
    if len(text) > LONGEST_TARGET:
        raise CaseError(f"bad target: {len(text):,} characters, at most {LONGEST_TARGET}")
    if redact(text) != text:
        raise CaseError(
            "bad target: it holds what looks like a secret (not stored, not shown); name the "
            "knob or the component by its role (e.g. component:proxy)"
        )
    match = _TARGET.match(text.strip())
    if match is None:
        raise CaseError(
            f"bad target {text!r}: expected knob:SERVICE/NAME (e.g. knob:decode/"
            "SGLANG_SM120_MMA_TARGET_CTAS, knob:decode/--disable-overlap-schedule) or "
            "component:NAME (e.g. component:proxy)"
        )
    if match["comp"] is not None:
        return Target("component", match["comp"])
    return Target("knob", match["knob"], match["svc"])


def check_verdicts(exonerate: Sequence[str], convict: Sequence[str]) -> dict[str, str]:
    """Validate resolve's targets into ``{target: verdict}``; a target cannot be both."""
    verdicts = {str(parse_target(t)): EXONERATED for t in exonerate}
    for text in convict:
        target = str(parse_target(text))
        if target in verdicts:
            raise CaseError(f"{target} cannot be both exonerated and convicted")
        verdicts[target] = CONVICTED
    return verdicts


# -- the case ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A case with everything recorded under it (oldest first)."""

    id: int
    title: str
    opened_at: str
    status: str
    root_cause: str | None
    resolved_at: str | None
    suspects: tuple[Suspect, ...] = ()
    evidence: tuple[CaseEvidence, ...] = ()
    events: tuple[CaseEvent, ...] = ()
    changes: tuple[KnobChangeRecord, ...] = ()

    def verdict(self, target: str) -> str | None:
        return next((s.verdict for s in self.suspects if s.target == target), None)

    def suspect(self, target: str) -> Suspect | None:
        return next((s for s in self.suspects if s.target == target), None)


def case_from_rows(
    case: CaseRecord,
    suspects: Sequence[Suspect],
    evidence: Sequence[CaseEvidence],
    events: Sequence[CaseEvent],
    changes: Sequence[KnobChangeRecord],
) -> Case:
    """Build a :class:`Case` from the ledger's records (``changes``: knob changes under it)."""
    return Case(
        id=case.id,
        title=case.title,
        opened_at=case.at,
        status=case.status,
        root_cause=case.root_cause,
        resolved_at=case.resolved_at,
        suspects=tuple(suspects),
        evidence=tuple(evidence),
        events=tuple(events),
        changes=tuple(changes),
    )


@dataclass(frozen=True)
class Opened:
    """The case was opened, with its title."""

    title: str


@dataclass(frozen=True)
class Suspected:
    """A target was named a suspect (and why, if said)."""

    target: str
    reason: str | None


@dataclass(frozen=True)
class EvidenceAdded:
    """A piece of evidence was attached: its kind, the row it names, its note."""

    kind: str
    ref_id: int | None
    note: str | None


@dataclass(frozen=True)
class KnobChanged:
    """A knob was changed under the case (the knob change's id, service, knob, values, why)."""

    id: int
    service: str
    name: str
    old: str | None
    new: str | None
    reason: str | None


#: What a timeline entry says: one type per thing the case model knows (the case's own
#: :class:`Resolution` among them), or a recorded case event's detail, as stored (JSON whose type
#: its ``kind`` names, an earlier resolution's too; each kind's reader decodes it).
TimelineData = Opened | Suspected | EvidenceAdded | KnobChanged | Resolution | Mapping[str, Any]


@dataclass(frozen=True)
class TimelineEntry:
    """One thing that happened in a case: ``kind`` and its data (wording is the renderer's)."""

    at: str
    kind: str
    data: TimelineData


def timeline(case: Case) -> list[TimelineEntry]:
    """Everything in the case in time order (stable for equal timestamps)."""
    entries = [TimelineEntry(case.opened_at, "opened", Opened(case.title))]
    entries += [
        TimelineEntry(s.at, "suspect", Suspected(s.target, s.reason)) for s in case.suspects
    ]
    entries += [
        TimelineEntry(e.at, "evidence", EvidenceAdded(e.kind, e.ref_id, e.note))
        for e in case.evidence
    ]
    entries += [TimelineEntry(c.at, "knob_change", _changed(c)) for c in case.changes]
    entries += [TimelineEntry(e.at, e.kind, e.detail) for e in case.events]
    if case.resolved_at is not None:
        verdicts = {s.target: s.verdict for s in case.suspects if s.verdict}
        resolution = Resolution(case.root_cause, verdicts)
        entries.append(TimelineEntry(case.resolved_at, Resolution.KIND, resolution))
    order = {id(e): i for i, e in enumerate(entries)}
    return sorted(entries, key=lambda e: (e.at, order[id(e)]))


def _changed(change: KnobChangeRecord) -> KnobChanged:
    return KnobChanged(
        change.id, change.service, change.name, change.old, change.new, change.reason
    )


# -- what a revert or a restore did (a case event's detail) ----------------------------------------

# A case event's detail as the codec writes it (:mod:`servelab.core.ledger.codec`): ``from`` for
# ``from_value`` (a keyword), ``failed_checks`` for ``failed``; a field an older detail lacks reads
# as its default.
_From = Annotated[str | None, Field(alias="from")]
_FailedChecks = Annotated[tuple[StoredCheck, ...], Field(alias="failed_checks")]


@dataclass(frozen=True)
class RevertEvent:
    """A knob reverted under a case: from, to, its change, restart outcomes, proof, cost; if not
    ``ok``, why: ``error`` (a restart or verify that did not complete; an older event: the sentence)
    or the ``failed`` checks, worded by :func:`servelab.report.case.event_error`."""

    service: str = ""
    knob: str = ""
    from_value: _From = None
    to: str | None = None
    change_id: int | None = None
    verification_id: int | None = None
    ok: bool = False
    restart: tuple[str, ...] = ()
    error: str | None = None
    cost_ab_id: int | None = None
    cost: tuple[ConcurrencyCost, ...] = ()
    failed: _FailedChecks = ()
    spec: Omitted[str] = None  # the spec file it ran with (None: recorded before it was named)


@dataclass(frozen=True)
class RestoreEvent:
    """A knob restored after its target was exonerated; ``ok``: proven live and e2e passed
    (else ``error`` and ``failed`` say why, as in :class:`RevertEvent`)."""

    service: str = ""
    knob: str = ""
    from_value: _From = None
    value: str | None = None
    live: str | None = None
    change_id: int | None = None
    verification_id: int | None = None
    ok: bool = False
    reverted_by: tuple[int, ...] = ()
    restart: tuple[str, ...] = ()
    error: str | None = None
    failed: _FailedChecks = ()


@dataclass(frozen=True)
class EventOutcome:
    """What a recorded revert or restore event says of its outcome, of any age (the fields both
    hold: ``ok``, ``error``, the ``failed`` checks; its other keys are not read)."""

    ok: bool = False
    error: str | None = None
    failed: _FailedChecks = ()


# -- restore plans ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreItem:
    """Set ``service``'s ``knob`` back from ``current`` to ``restore_to`` (what it was before)."""

    service: str
    knob: str
    current: str | None
    restore_to: str | None
    change_ids: tuple[int, ...]
    reverted_at: str
    case_id: int
    cost: RevertCost = field(default_factory=lambda: RevertCost("", "", None, None))
    superseded_by: int | None = None

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.knob}"


def restore_plan(
    case: Case,
    ab_runs: Sequence[AbRunRecord] = (),
    later_changes: Sequence[KnobChangeRecord] = (),
) -> list[RestoreItem]:
    """Every knob changed under this case whose target was exonerated, with the revert's cost.

    ``later_changes``: every recorded change of those knobs. When the newest of them, after the
    case's own last change of the knob (its restore's included), left another value than that
    change did, it is the item's ``superseded_by``: the knob moved since, restoring may undo it.
    Changes that came back to the case's value (an A/B ends on the original) do not count.
    """
    if case.status != CASE_RESOLVED:
        return []
    reverts = revert_changes(case)
    items: list[RestoreItem] = []
    for target in dict.fromkeys(c.target for c in reverts):
        if case.verdict(target) != EXONERATED:
            continue
        mine = [c for c in reverts if c.target == target]
        first, last = mine[0], mine[-1]
        if first.old == last.new:
            continue
        cost = revert_cost(ab_runs, last.service, last.name, first.old, last.new)
        items.append(
            RestoreItem(
                service=last.service,
                knob=last.name,
                current=last.new,
                restore_to=first.old,
                change_ids=tuple(c.id for c in mine),
                reverted_at=first.at,
                case_id=case.id,
                cost=cost,
                superseded_by=_superseded(later_changes, _own_last(case, last)),
            )
        )
    return items


def revert_changes(case: Case) -> list[KnobChangeRecord]:
    """The case's knob changes, minus those a ``restore`` event made (its ``change_id``)."""
    restored = {
        decode(RestoreEvent, e.detail).change_id for e in case.events if e.kind == "restore"
    }
    return [c for c in case.changes if c.id not in restored]


def _own_last(case: Case, last: KnobChangeRecord) -> KnobChangeRecord:
    """The case's newest change of ``last``'s knob, its restore's included."""
    same = [c for c in case.changes if (c.service, c.name) == (last.service, last.name)]
    return max(same, key=lambda c: c.id, default=last)


def _superseded(changes: Sequence[KnobChangeRecord], own: KnobChangeRecord) -> int | None:
    later = [c for c in changes if (c.service, c.name) == (own.service, own.name)]
    newest = max((c for c in later if c.id > own.id), key=lambda c: c.id, default=None)
    return None if newest is None or newest.new == own.new else newest.id


def restore_status(case: Case, plan: Sequence[RestoreItem]) -> str:
    """Where the case's restore stands: one of the ``RESTORE_*`` strings.

    A plan item counts as restored when a ``restore`` event for its knob says ``ok`` (the value
    was proven live and the e2e probe passed), after the revert.
    """
    if case.status != CASE_RESOLVED:
        return RESTORE_UNRESOLVED
    if not plan:
        return RESTORE_NONE
    restores = [e for e in case.events if e.kind == "restore"]
    states = [_item_state(item, restores) for item in plan]
    if all(s == "verified" for s in states):
        return RESTORE_VERIFIED
    return RESTORE_FAILED if "failed" in states else RESTORE_PENDING


def _item_state(item: RestoreItem, restores: Sequence[CaseEvent]) -> str:
    state = "pending"
    for event in restores:
        done = decode(RestoreEvent, event.detail)
        if (done.service, done.knob) != (item.service, item.knob):
            continue
        state = "verified" if done.ok else "failed"
    return state
