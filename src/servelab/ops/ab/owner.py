"""Whose journalled A/B or tune it is (issue 38): ``--resume`` from another deployment refused.

A journalled run's original values, and its finished visits, are the deployment's it was started
on. Resumed from another (two specs sharing one ledger), it would pair that deployment's visits
with these in one verdict and, at its end, write these original values into that deployment's
files. So each run names its deployment when it starts (:mod:`servelab.io.ledger.owners`: the
mark of its (first) service, :func:`~servelab.io.hosts.processes.spec_mark`, compared as pid
records are, :func:`~servelab.io.hosts.ownrecord.same_deployment`), and ``--resume`` from another
one is refused (exit 2) before anything is restarted, measured or written, naming the deployment
and the spec to resume it with.

A run recorded before runs named their deployment cannot be told by its owner. It is resumed
only where every knob's file holds the run's original value, as an interrupted run leaves its
own deployment (the original is put back when it stops); else it is refused the same way
(:func:`not_as_left`: the one check of a thing recorded before it named its deployment, which a
case's restore and a bisection's resume run too).

Each refusal is typed (:class:`~servelab.core.deploy.refusals.RunRefused` carrying what was
refused), worded in :mod:`servelab.report.refusals`.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.deploy.mark import Mark
from servelab.core.deploy.refusals import (
    AnothersRun,
    NotAsLeft,
    Recorded,
    RunRefused,
    SpecToUse,
)
from servelab.io.hosts.ownrecord import named_deployment, same_deployment
from servelab.io.hosts.processes import spec_mark
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import JournalOwner, RunKind, read_owner
from servelab.io.specfile import EMBEDDED, LoadedSpec
from servelab.ops.context import Operation, SpecOrOperation
from servelab.ops.knob import get_knob

__all__ = ["journal_owner", "not_as_left", "refuse_anothers_run", "refuse_unowned_elsewhere"]


def _loaded(target: SpecOrOperation) -> LoadedSpec:
    return target.loaded if isinstance(target, Operation) else target


def journal_owner(target: SpecOrOperation, service: str) -> JournalOwner:
    """This deployment, as a run of its ``service`` (the A/B's; a tune's first knob's) names it."""
    loaded = _loaded(target)
    return JournalOwner(loaded.spec.name, spec_mark(loaded, service), loaded.source)


def refuse_anothers_run(
    ledger: Ledger, kind: RunKind, run_id: int, target: SpecOrOperation, service: str
) -> bool:
    """Refuse (:class:`~servelab.core.deploy.refusals.RunRefused`, exit 2) to resume run
    ``run_id`` of another deployment than ``target``'s; True: the run is this deployment's,
    False: it was recorded before runs named theirs (:func:`refuse_unowned_elsewhere`
    decides)."""
    owner = read_owner(ledger, kind, run_id)
    if owner is None:
        return False
    loaded = _loaded(target)
    spec = loaded.spec
    ours = spec_mark(loaded, service) if service in spec.services else str(Mark(spec.name, ""))
    if service in spec.services and same_deployment(owner.mark, ours):
        return True
    whose = named_deployment(owner.mark, ours)
    used = SpecToUse(owner.spec, embedded=owner.spec == EMBEDDED)
    raise RunRefused(AnothersRun(str(kind), run_id, whose, used))


async def not_as_left(
    op: Operation,
    settings: Sequence[tuple[str, str, str | None]],
    what: Recorded,
    run_id: int,
    case_id: int | None = None,
) -> NotAsLeft | None:
    """The first ``(service, knob, left)`` of ``settings`` this deployment's file does not hold
    (``left``: what ``what``, recorded before it named its deployment, leaves its own deployment
    holding: an interrupted run's original, a revert's value, an interrupted bisection's bad),
    or whose service this deployment lacks; None: each holds it. Reads only."""
    for service, knob, left in settings:
        if service not in op.spec.services:
            return NotAsLeft(what, run_id, service, knob, None, left, True, case_id)
        found = await get_knob(op, service, knob)
        if found != left:
            return NotAsLeft(what, run_id, service, knob, found, left, False, case_id)
    return None


async def refuse_unowned_elsewhere(
    op: Operation,
    kind: RunKind,
    run_id: int,
    settings: Sequence[tuple[str, str, str | None]],
) -> None:
    """A run recorded before runs named their deployment: refused (exit 2) unless each
    ``(service, knob, original)`` of it is what this deployment's file holds, as an interrupted
    run leaves its own. Reads only."""
    what = Recorded.AB if kind is RunKind.AB else Recorded.TUNE
    refused = await not_as_left(op, settings, what, run_id)
    if refused is not None:
        raise RunRefused(refused)
