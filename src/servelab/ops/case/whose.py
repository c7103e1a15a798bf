"""Whose changes a case holds (issue 38): ``restore`` and ``case revert`` from another deployment
refused.

Two deployments (two specs) may share one ledger. A case's restore plan is made of its reverts,
and its values are the files' of the deployment that reverted them; restored from another one,
they would be written into that one's files (the hand-edit check reads this deployment's history
only, so it no longer fires). So a restore whose reverts another deployment recorded
(``knob_changes.deployment``: the mark of the changed service,
:func:`~servelab.ops.knob.knob_owner`, so another spec of the same name is another deployment;
a name alone in rows written before marks) is refused (exit 2) before anything is written or
restarted, naming that deployment and the spec to restore it with (the revert event's ``spec``,
when it was recorded with one); so is a revert of a knob the case already holds another
deployment's change of (the case's plan would mix both).

A bisection (``case bisect --resume``, ``investigate --resume``) is the deployment's it was
started on: its probes were measured there and its visits set its change values there, so its
start (:class:`~servelab.core.case.probe.BisectRecord`) names the deployment as a journalled A/B
does (:mod:`servelab.ops.ab.owner`: the mark of its first change's service), and resuming it from
another is refused the same way; one recorded before it was named is resumed only where each
change's file holds its ``bad`` value, as an interrupted bisection leaves its own deployment (the
knobs put back as found: the bad state, ``now``).

A revert recorded before changes named their deployment cannot be told by its owner: it is
restored only where the knob's file holds the value the revert left (as its own deployment's
does), else refused the same way, unless ``--force`` (the caller's hand-edit override). A
restore's and a bisection's are one check (:func:`~servelab.ops.ab.owner.not_as_left`, as an
A/B's). Each refusal is typed (:class:`~servelab.core.deploy.refusals.CaseRefused` carrying what
was refused), worded in :mod:`servelab.report.refusals`.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.case.bisect import Change
from servelab.core.case.contract import RestoreAdvice, RestoreWhose, RevertPreview
from servelab.core.case.model import Case, RestoreItem, RevertEvent
from servelab.core.case.probe import BisectRecord
from servelab.core.deploy.mark import Mark
from servelab.core.deploy.refusals import (
    AnothersBisection,
    AnothersRestore,
    AnothersRevert,
    CaseRefused,
    Recorded,
    SpecToUse,
)
from servelab.core.ledger.codec import decode
from servelab.io.hosts.ownrecord import made_by, named_deployment, same_deployment
from servelab.io.hosts.processes import spec_mark
from servelab.io.specfile import EMBEDDED, LoadedSpec
from servelab.ops.ab.owner import not_as_left
from servelab.ops.context import Operation
from servelab.ops.knob import knob_owner

__all__ = [
    "bisect_owner",
    "refuse_anothers_bisect",
    "refuse_anothers_restore",
    "refuse_anothers_revert",
    "restore_advice",
]


def _spec(spec: str | None) -> SpecToUse:
    """The spec a revert or bisection recorded (None: none recorded)."""
    return SpecToUse(spec, embedded=spec == EMBEDDED)


def _spec_of(case: Case, change_ids: Sequence[int]) -> SpecToUse:
    """The spec file the revert of one of ``change_ids`` ran with, if its event names one."""
    for event in case.events:
        if event.kind != "revert":
            continue
        revert = decode(RevertEvent, event.detail)
        if revert.change_id in change_ids and revert.spec:
            return _spec(revert.spec)
    return _spec(None)


def _others(op: Operation | LoadedSpec, case: Case, ids: Sequence[int]) -> str | None:
    """Another deployment than ``op``'s that recorded one of the changes ``ids``, if any: its
    name, with its service's address when the name is this one's too (two specs of one name)."""
    loaded = op if isinstance(op, LoadedSpec) else op.loaded
    found = ((c.deployment, knob_owner(loaded, c.service)) for c in case.changes if c.id in ids)
    names = sorted({named_deployment(rec, ours) for rec, ours in found
                    if rec is not None and not made_by(rec, ours)})  # fmt: skip
    return names[0] if names else None


def restore_advice(loaded: LoadedSpec, case: Case, plan: Sequence[RestoreItem]) -> RestoreAdvice:
    """Where ``case``'s restore (``plan``) would be accepted, seen from ``loaded``: the checks
    :func:`refuse_anothers_restore` makes first, without reading a file (a revert recorded
    before changes named their deployment is this one's here: its file is read at restore)."""
    whose = tuple(
        None if (other := _others(loaded, case, item.change_ids)) is None
        else RestoreWhose(other, _args(_spec_of(case, item.change_ids)))
        for item in plan
    )  # fmt: skip
    theirs = {w for w in whose if w is not None}
    if not theirs:
        return RestoreAdvice(loaded.spec.name, whose, loaded.spec_args)
    one = len(theirs) == 1 and None not in whose
    return RestoreAdvice(loaded.spec.name, whose, next(iter(theirs)).spec_args if one else None)


def _args(spec: SpecToUse) -> tuple[str, ...] | None:
    """A recorded spec file as ``-f`` words (``()``: the embedded default; None: unknown)."""
    return () if spec.embedded else None if spec.path is None else ("-f", spec.path)


async def refuse_anothers_restore(
    op: Operation, case: Case, plan: Sequence[RestoreItem], *, force: bool
) -> None:
    """Raise :class:`~servelab.core.deploy.refusals.CaseRefused` (exit 2) when an item's reverts
    are another deployment's than ``op``'s, or (unless ``force``) were recorded before changes
    named their deployment and the file does not hold the value they left. Reads only."""
    for item in plan:
        other = _others(op, case, item.change_ids)
        if other is not None:
            spec = _spec_of(case, item.change_ids)
            raise CaseRefused(AnothersRestore(case.id, item.target, other, op.spec.name, spec))
    if force:
        return
    for item in plan:
        owned = {c.deployment for c in case.changes if c.id in item.change_ids} - {None}
        if owned:
            continue
        left = [(item.service, item.knob, item.current)]
        refused = await not_as_left(op, left, Recorded.REVERT, case.id)
        if refused is not None:
            raise CaseRefused(refused)


def refuse_anothers_revert(op: Operation, case: Case, preview: RevertPreview) -> None:
    """Raise :class:`~servelab.core.deploy.refusals.CaseRefused` (exit 2) when ``case`` already
    holds another deployment's change of the previewed knob: its reverts are that deployment's,
    and this one's would mix in."""
    service, knob = preview.service, preview.knob
    ids = [c.id for c in case.changes if (c.service, c.name) == (service, knob)]
    other = _others(op, case, ids)
    if other is not None:
        target = f"knob:{service}/{knob}"
        spec = _spec_of(case, ids)
        raise CaseRefused(AnothersRevert(case.id, target, other, op.spec.name, spec))


def bisect_owner(op: Operation, changes: Sequence[Change]) -> tuple[str, str, str]:
    """This deployment as a bisection of ``changes`` names it: the spec's name, the mark of the
    first change's service ("" when the spec has no such service) and the spec file."""
    service = changes[0].service if changes else ""
    mark = spec_mark(op.loaded, service) if service in op.spec.services else ""
    return op.spec.name, mark, op.loaded.source


async def refuse_anothers_bisect(op: Operation, bisect_id: int, start: BisectRecord) -> None:
    """Raise :class:`~servelab.core.deploy.refusals.CaseRefused` (exit 2) before a bisection
    started on another deployment than ``op``'s is resumed (see the module docstring). Reads
    only."""
    service = start.changes[0].service if start.changes else ""
    here = spec_mark(op.loaded, service) if service in op.spec.services else None
    if start.deployment is not None and start.mark is not None:
        if here is not None and same_deployment(start.mark, here):
            return
        # a start recorded where its spec lacked the service holds no mark (""): its name then
        ours = here or str(Mark(op.spec.name, ""))
        whose = named_deployment(start.mark or start.deployment, ours)
        raise CaseRefused(AnothersBisection(start.case_id, bisect_id, whose, op.spec.name,
                                            start.deployment, _spec(start.spec)))  # fmt: skip
    left = [(c.service, c.knob, c.bad) for c in start.changes]
    refused = await not_as_left(op, left, Recorded.BISECTION, bisect_id, start.case_id)
    if refused is not None:
        raise CaseRefused(refused)
