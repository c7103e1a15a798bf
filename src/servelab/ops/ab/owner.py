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
own deployment (the original is put back when it stops); else it is refused the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.errors import OptionError
from servelab.io.hosts.ownrecord import same_deployment
from servelab.io.hosts.processes import spec_mark
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.owners import JournalOwner, RunKind, read_owner
from servelab.io.specfile import EMBEDDED, LoadedSpec
from servelab.ops.context import Operation, SpecOrOperation
from servelab.ops.knob import get_knob

__all__ = ["journal_owner", "refuse_anothers_run", "refuse_unowned_elsewhere"]

_WHAT = {RunKind.AB: "A/B", RunKind.TUNE: "tune"}


def _loaded(target: SpecOrOperation) -> LoadedSpec:
    return target.loaded if isinstance(target, Operation) else target


def journal_owner(target: SpecOrOperation, service: str) -> JournalOwner:
    """This deployment, as a run of its ``service`` (the A/B's; a tune's first knob's) names it."""
    loaded = _loaded(target)
    return JournalOwner(loaded.spec.name, spec_mark(loaded.spec, service), loaded.source)


def _whose(owner: JournalOwner, ours: str) -> str:
    """The owner's name, with its service's address when the name is this deployment's too."""
    if owner.deployment != ours:
        return owner.deployment
    address = owner.mark.rpartition("/")[2].partition("@")[2]
    return f"{owner.deployment}@{address}" if address else owner.deployment


def _resume_with(owner: JournalOwner) -> str:
    if owner.spec == EMBEDDED:
        return "the embedded default spec); resume it without -f, where no servelab.toml is"
    return f"spec {owner.spec}); resume it with -f {owner.spec}"


def refuse_anothers_run(
    ledger: Ledger, kind: RunKind, run_id: int, target: SpecOrOperation, service: str
) -> bool:
    """Refuse (:class:`~servelab.errors.OptionError`, exit 2) to resume run ``run_id`` of
    another deployment than ``target``'s; True: the run is this deployment's, False: it was
    recorded before runs named theirs (:func:`refuse_unowned_elsewhere` decides)."""
    owner = read_owner(ledger, kind, run_id)
    if owner is None:
        return False
    spec = _loaded(target).spec
    if service in spec.services and same_deployment(owner.mark, spec_mark(spec, service)):
        return True
    raise OptionError(
        f"{_WHAT[kind]} {run_id} was {_whose(owner, spec.name)}'s ({_resume_with(owner)}"
    )


async def refuse_unowned_elsewhere(
    op: Operation,
    kind: RunKind,
    run_id: int,
    settings: Sequence[tuple[str, str, str | None]],
) -> None:
    """A run recorded before runs named their deployment: refused (exit 2) unless each
    ``(service, knob, original)`` of it is what this deployment's file holds, as an interrupted
    run leaves its own. Reads only."""
    for service, knob, original in settings:
        head = f"{_WHAT[kind]} {run_id} was recorded before a run named its deployment, and"
        tail = "resume it with -f the spec it ran with, or start a new one"
        if service not in op.spec.services:
            raise OptionError(f"{head} this deployment has no service {service}: {tail}")
        found = await get_knob(op, service, knob)
        if found != original:
            was = "unset" if original is None else original
            now = "unset" if found is None else found
            raise OptionError(
                f"{head} this deployment's {service} {knob} is {now}, not its original {was} "
                f"(another deployment's run, or a value changed since): {tail}"
            )
