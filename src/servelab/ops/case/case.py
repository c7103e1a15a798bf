"""Cases: open one, name suspects, attach evidence, revert a suspect knob, resolve, restore.

Every step is recorded in the ledger. ``revert`` and ``restore`` change a deployment through
:func:`servelab.ops.case.apply.apply_knobs`: they set the knob (``servelab.ops.knob.set_knob``,
recorded under the case), co-restart the changed services and their dependents in start order
(``servelab.ops.deploy.deploy.restart`` by :func:`servelab.core.deploy.topology.restart_plan`, the
one restart rule that ``restart`` and the A/B use too), and run a layered verify that proves the
value live plus an e2e probe (``servelab.ops.verify.verify.verify``). What they did comes back
typed (:class:`~servelab.ops.case.apply.Applied`: the ``KnobChange``s, the restart ``Step``s, the
``VerifyReport``) and is recorded as the case event's ``RevertEvent``/``RestoreEvent``
(:mod:`servelab.core.case.model`). All of it runs in one
:class:`~servelab.ops.context.Operation` (one SSH connection per host).

No printing and no wording here; progress goes through a callback. A revert or restore that did not
verify carries why as data (``failure``: the restart or verify that did not complete; else the
verification's failed checks); :mod:`servelab.report.case` words it. The CLI shows
:func:`revert_preview` (the cost of the revert, measured by recorded A/B experiments, and what
evidence would convict the knob) before it asks to go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from servelab.core.ab.record import AbRunRecord
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.contract import (
    RestoreOutcome,
    RevertOutcome,
    RevertPreview,
    failed_checks_of,
)
from servelab.core.case.model import (
    CASE_RESOLVED,
    RESTORE_VERIFIED,
    Case,
    RestoreEvent,
    RestoreItem,
    RevertEvent,
    Target,
    TimelineEntry,
    case_from_rows,
    check_verdicts,
    parse_target,
    restore_plan,
    restore_status,
    timeline,
)
from servelab.core.case.record import CaseEvent, CaseEvidence, CaseRecord, PutBackEvent, Suspect
from servelab.core.case.revert import check_recorded, conviction_test, revert_cost, revert_value
from servelab.core.case.verdicts import Override, Refusal, refusals
from servelab.core.deploy.putback import PutBack
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knobs.contract import KnobChange
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import check_knob_name
from servelab.core.ledger.codec import encode
from servelab.core.soak.record import SoakRunRecord
from servelab.core.verify.record import VerificationRecord
from servelab.errors import CaseError
from servelab.io.hosts.ownrecord import made_by
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import LoadedSpec
from servelab.ops.case.handedit import knob_history, refuse_hand_edits
from servelab.ops.case.missing import refuse_missing_env_files
from servelab.ops.case.whose import refuse_anothers_restore, refuse_anothers_revert
from servelab.ops.context import Progress, SpecOrOperation, operation
from servelab.ops.knob import check_setting, get_knob

if TYPE_CHECKING:  # the knob-setting, co-restart and verify machinery (aiohttp with it): only
    from servelab.ops.case.apply import Applied  # revert and restore import it, when they run

__all__ = [
    "CaseView",
    "VerdictRefused",
    "add_evidence",
    "add_suspect",
    "already_restored",
    "check_revert_to",
    "current_value",
    "list_cases",
    "load_case",
    "open_case",
    "resolve_case",
    "restore",
    "revert",
    "revert_preview",
    "verdict_refusals",
    "view_case",
]


_EVIDENCE_LOOKUP = {
    "run": lambda led, i: led.get(BenchRunRecord, i, whole=False),
    "verify": lambda led, i: led.get(VerificationRecord, i),
    "soak": lambda led, i: led.get(SoakRunRecord, i),
    "ab": lambda led, i: led.get(AbRunRecord, i),
}


# -- reading cases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseView:
    """A case with its timeline, its restore plan and where the restore stands."""

    case: Case
    timeline: list[TimelineEntry]
    plan: list[RestoreItem]
    restore_status: str


def load_case(ledger: Ledger, case_id: int) -> Case:
    """The case with its suspects, evidence, events and the knob changes made under it."""
    row = ledger.get(CaseRecord, case_id)
    if row is None:
        raise CaseError(f"no case {case_id} in {ledger.path}")
    return case_from_rows(
        row,
        ledger.list(Suspect, case_id=case_id),
        ledger.list(CaseEvidence, case_id=case_id),
        ledger.list(CaseEvent, case_id=case_id),
        ledger.list(KnobChangeRecord, case_id=case_id),
    )


def view_case(ledger: Ledger, case_id: int) -> CaseView:
    case = load_case(ledger, case_id)
    plan = restore_plan(case, ledger.list(AbRunRecord), _later_changes(ledger, case))
    return CaseView(case, timeline(case), plan, restore_status(case, plan))


def _later_changes(ledger: Ledger, case: Case) -> list[KnobChangeRecord]:
    """The case's knobs' changes by the deployment that made the case's (issue 38; unnamed: any)."""
    knobs = {(c.service, c.name): c.deployment for c in case.changes}
    return [row for (s, n), dep in sorted(knobs.items(), key=lambda kv: kv[0])
            for row in ledger.list(KnobChangeRecord, service=s, name=n)
            if made_by(row.deployment, dep)]  # fmt: skip


def list_cases(ledger: Ledger) -> list[CaseView]:
    return [view_case(ledger, row.id) for row in ledger.list(CaseRecord)]


# -- writing cases ---------------------------------------------------------------------------


def open_case(ledger: Ledger, title: str) -> int:
    if not title.strip():
        raise CaseError("a case needs a title")
    return ledger.add(CaseRecord(id=0, at=NOW, title=title.strip(), status="open"))


def add_suspect(
    ledger: Ledger,
    case_id: int,
    target: str,
    reason: str | None,
    *,
    spec: DeploymentSpec | None = None,
) -> int:
    """Put ``target`` under suspicion; a knob must be one ``spec`` declares (as ``knob set``
    demands: :func:`~servelab.core.knobs.rules.check_knob_name`), when a spec is given."""
    parsed = parse_target(target)
    if spec is not None and parsed.kind == "knob":
        check_knob_name(spec, str(parsed.service), parsed.name)
    _open_case(ledger, case_id)
    return ledger.add(Suspect(at=NOW, case_id=case_id, target=str(parsed), reason=reason))


def add_evidence(
    ledger: Ledger, case_id: int, kind: str, ref_id: int | None = None, note: str | None = None
) -> int:
    """Attach a recorded ``run``/``verify``/``soak``/``ab`` (by id) or a ``note`` to the case."""
    load_case(ledger, case_id)
    if kind == "note":
        if not note:
            raise CaseError("a note needs text")
        return ledger.add(
            CaseEvidence(at=NOW, case_id=case_id, kind="note", ref_id=None, note=note)
        )
    lookup = _EVIDENCE_LOOKUP.get(kind)
    if lookup is None:
        raise CaseError(f"unknown evidence kind {kind!r}")
    if ref_id is None or lookup(ledger, ref_id) is None:
        raise CaseError(f"no {kind} {ref_id} recorded in {ledger.path}")
    return ledger.add(CaseEvidence(at=NOW, case_id=case_id, kind=kind, ref_id=ref_id, note=note))


class VerdictRefused(CaseError):
    """Verdicts the case's recorded evidence does not allow (``refused``: which, why, the ids)."""

    def __init__(self, case_id: int, refused: Sequence[Refusal]) -> None:
        self.case_id = case_id
        self.refused = tuple(refused)
        parts = [
            f"{r.target} {r.verdict}: "
            + (f"contradicted by evidence {', '.join(f'#{i}' for i in r.evidence_ids)}"
               if r.evidence_ids else "no recorded evidence supports it")
            for r in self.refused
        ]  # fmt: skip
        super().__init__(
            f"case {case_id}: refused: {'; '.join(parts)} (run servelab case test {case_id} "
            'TARGET, or give --override "REASON")'
        )


def verdict_refusals(ledger: Ledger, case: Case, verdicts: Mapping[str, str]) -> list[Refusal]:
    """The verdicts that the case's recorded evidence refuses
    (:mod:`servelab.core.case.verdicts`)."""
    ids = {e.ref_id for e in case.evidence if e.kind == "soak" and e.ref_id is not None}
    soaks = {i: s for i in sorted(ids) if (s := ledger.get(SoakRunRecord, i)) is not None}
    return refusals(verdicts, case.events, case.evidence, soaks)


def resolve_case(
    ledger: Ledger,
    case_id: int,
    root_cause: str,
    exonerate: Sequence[str] = (),
    convict: Sequence[str] = (),
    *,
    override: str | None = None,
) -> CaseView:
    """Record the root cause and verdicts; the returned view holds the restore plan.

    A verdict the recorded evidence refuses (:func:`verdict_refusals`) raises
    :class:`VerdictRefused`, unless ``override`` gives a reason: then it is recorded with the
    refusals as an ``override`` case event. A resolved case may be resolved again (a verdict
    corrected): the earlier resolution stays in its timeline (a ``resolved`` event,
    :class:`~servelab.core.case.record.Resolution`)."""
    if not root_cause.strip():
        raise CaseError("--root-cause must say what the cause was")
    if override is not None and not override.strip():
        raise CaseError("--override must say why the evidence is overruled")
    verdicts = check_verdicts(exonerate, convict)
    refused = verdict_refusals(ledger, load_case(ledger, case_id), verdicts)
    if refused and override is None:
        raise VerdictRefused(case_id, refused)
    if refused and override is not None:
        detail = encode(Override(override.strip(), tuple(refused)))
        ledger.add(CaseEvent(at=NOW, case_id=case_id, kind=Override.KIND, detail=detail))
    ledger.resolve_case(case_id=case_id, root_cause=root_cause.strip(), verdicts=verdicts)
    return view_case(ledger, case_id)


def _open_case(ledger: Ledger, case_id: int) -> Case:
    case = load_case(ledger, case_id)
    if case.status == CASE_RESOLVED:
        raise CaseError(f"case {case_id} is resolved; open a new case")
    return case


# -- revert ----------------------------------------------------------------------------------


def _knob_target(text: str) -> Target:
    target = parse_target(text)
    if target.kind != "knob" or target.service is None:
        raise CaseError(f"only a knob can be reverted, not {target}")
    return target


def revert_preview(
    ledger: Ledger,
    case_id: int,
    target: str,
    *,
    current: str | None,
    to: str | None = None,
    deployment: LoadedSpec | None = None,
) -> RevertPreview:
    """The revert of ``target`` under an open case in which it is a suspect.

    ``current`` is the knob's value in the env file now; the revert goes to the value before the
    recorded change that set it, round trips (an A/B's arms and their put-back) left out
    (:func:`~servelab.core.case.revert.setting_change`), or ``to``; the changes read are the
    deployment ``deployment``'s (None: any deployment's;
    :func:`~servelab.ops.case.handedit.knob_history`).
    """
    parsed = _knob_target(target)
    service, knob = str(parsed.service), parsed.name
    case = _open_case(ledger, case_id)
    if case.suspect(str(parsed)) is None:
        raise CaseError(
            f"{parsed} is not a suspect of case {case_id}; first: "
            f"servelab case suspect {case_id} {parsed} --reason ..."
        )
    recorded = (
        ledger.list(KnobChangeRecord, service=service, name=knob)
        if deployment is None
        else knob_history(ledger, deployment, service, knob)
    )
    revert_to = revert_value(recorded, service, knob, current, to)
    if revert_to == current:
        raise CaseError(_nothing_to_revert(service, knob, current, said=to is not None))
    cost = revert_cost(
        ledger.list(AbRunRecord, service=service, knob=knob), service, knob, current, revert_to
    )
    test = conviction_test(ledger.list(SoakRunRecord), service, knob, current, revert_to)
    return RevertPreview(case_id, str(parsed), service, knob, current, revert_to, cost, test)


def check_revert_to(spec: DeploymentSpec, target: str, value: str | None) -> None:
    """Refuse a ``--to`` value the knob cannot take before anything is asked or changed (the
    knob's value check, :func:`~servelab.ops.knob.check_setting`: KnobError, exit 2)."""
    parsed = _knob_target(target)
    check_setting(spec, str(parsed.service), parsed.name, value)


async def current_value(where: SpecOrOperation, target: str) -> str | None:
    """The knob's value in the service's env file now."""
    parsed = _knob_target(target)
    return await get_knob(where, str(parsed.service), parsed.name)


async def revert(
    where: SpecOrOperation,
    ledger: Ledger,
    preview: RevertPreview,
    *,
    progress: Progress | None = None,
    force: bool = False,
) -> RevertOutcome:
    """Apply a previewed revert: set the knob, co-restart, verify live + e2e, record the event.
    A knob edited by hand since servelab last wrote it is refused first, unless ``force``."""
    from servelab.ops.case.apply import apply_knobs, check_records, live_value  # a co-restart

    reason = f"case {preview.case_id}: reverted under suspicion ({preview.target})"
    wanted = [(preview.service, preview.knob, preview.revert_to)]
    async with operation(where, ledger=ledger, progress=progress) as op:
        check_setting(op.spec, preview.service, preview.knob, preview.revert_to)
        await refuse_missing_env_files(op, [preview.service], command="case revert")
        refuse_anothers_revert(op, load_case(ledger, preview.case_id), preview)
        if not force:
            await refuse_hand_edits(op, ledger, [(preview.service, preview.knob)],
                                    command="case revert")  # fmt: skip
        done = await apply_knobs(op, ledger, preview.case_id, wanted, reason, op.say)
    live = live_value(done.report, preview.service, preview.knob)
    outcome = RevertOutcome(preview, done.changes[0], done.steps, done.report, live,
                            failure=done.error, put_back=done.put_back)  # fmt: skip
    event = RevertEvent(
        service=preview.service, knob=preview.knob, from_value=preview.current,
        to=preview.revert_to, change_id=done.changes[0].change_id,
        verification_id=done.verification_id, ok=outcome.ok,
        restart=tuple(s.outcome for s in done.steps), error=done.error,
        cost_ab_id=preview.cost.ab_id, cost=preview.cost.points,
        failed=check_records(outcome.failed_checks), spec=op.loaded.source,
    )  # fmt: skip
    outcome.event_id = ledger.add(
        CaseEvent(at=NOW, case_id=preview.case_id, kind="revert", detail=encode(event))
    )
    _record_put_back(ledger, preview.case_id, "revert", done.put_back)
    return outcome


def _record_put_back(ledger: Ledger, case_id: int, after: str, put: PutBack | None) -> None:
    """A failed restart's put-back, as a case event after the ``revert``'s or ``restore``'s."""
    if put is None:
        return
    event = PutBackEvent(after, put.written, put.restarted, put.down, put.ok, put.verified,
                         put.error)  # fmt: skip
    ledger.add(CaseEvent(at=NOW, case_id=case_id, kind=PutBackEvent.KIND, detail=encode(event)))


# -- restore ---------------------------------------------------------------------------------


async def restore(
    where: SpecOrOperation,
    ledger: Ledger,
    case_id: int,
    *,
    progress: Progress | None = None,
    force: bool = False,
) -> RestoreOutcome:
    """Apply the case's restore plan: knobs set, ordered co-restart, layered verify, recorded.
    A knob edited by hand since servelab last wrote it is refused first, unless ``force``."""
    from servelab.ops.case.apply import apply_knobs  # the co-restart machinery: only here

    view = view_case(ledger, case_id)
    if view.case.status != CASE_RESOLVED:
        raise CaseError(f"case {case_id} is not resolved; resolve it with its verdicts first")
    if not view.plan:
        raise CaseError(f"case {case_id} has nothing to restore ({view.restore_status})")
    if already_restored(view):
        return RestoreOutcome(case_id, [], [], None, status=view.restore_status)
    for item in view.plan:
        check_recorded(item.service, item.knob, item.restore_to)
    wanted = [(i.service, i.knob, i.restore_to) for i in view.plan]
    reason = f"case {case_id}: restore ({', '.join(i.target for i in view.plan)} exonerated)"
    async with operation(where, ledger=ledger, progress=progress) as op:
        await refuse_missing_env_files(op, [s for s, _k, _v in wanted], command="restore")
        if not force:
            await refuse_hand_edits(op, ledger, [(s, k) for s, k, _v in wanted], command="restore")
        await refuse_anothers_restore(op, view.case, view.plan, force=force)
        done = await apply_knobs(op, ledger, case_id, wanted, reason, op.say)
    outcome = RestoreOutcome(case_id, [], done.steps, done.report, failure=done.error,
                             put_back=done.put_back)  # fmt: skip
    for item, change in zip(view.plan, done.changes, strict=True):
        event = _restore_event(item, change, done)
        outcome.items.append(event)
        outcome.event_ids.append(
            ledger.add(CaseEvent(at=NOW, case_id=case_id, kind="restore", detail=encode(event)))
        )
    _record_put_back(ledger, case_id, "restore", done.put_back)
    outcome.status = view_case(ledger, case_id).restore_status
    return outcome


def already_restored(view: CaseView) -> bool:
    """Every item restored and verified, and no knob moved since: nothing to set or restart."""
    moved = any(item.superseded_by is not None for item in view.plan)
    return view.restore_status == RESTORE_VERIFIED and not moved


def _restore_event(item: RestoreItem, change: KnobChange, done: Applied) -> RestoreEvent:
    from servelab.ops.case.apply import check_records, live_value  # loaded by restore() already

    live = live_value(done.report, item.service, item.knob)
    verified = done.report is not None and done.report.ok and live == item.restore_to
    return RestoreEvent(
        service=item.service, knob=item.knob, from_value=item.current, value=item.restore_to,
        live=live, change_id=change.change_id, verification_id=done.verification_id,
        ok=verified, reverted_by=item.change_ids, restart=tuple(s.outcome for s in done.steps),
        error=done.error, failed=check_records(failed_checks_of(done.report)),
    )  # fmt: skip


def _nothing_to_revert(service: str, knob: str, current: str | None, *, said: bool) -> str:
    """Why a revert would leave ``knob`` at ``current``: the value said is it, or no recorded
    change set it from another value (an experiment's writes, a round trip)."""
    if said:
        return f"{service}/{knob} is already {current}; nothing to revert"
    return (f"no recorded change set {service}/{knob} to {current} from another value (those "
            "recorded, an experiment's arms and put-back or a round trip, left it as they found "
            "it); say the value to revert to with --to")  # fmt: skip
