"""A hand edit is never overwritten silently (issue 38, the eighth pass): before ``restore`` or
``case revert`` writes a knob back, the value its file holds now is compared with what servelab
last wrote there (the newest change the ledger holds for that knob). When they differ, someone
edited the file since: the command refuses, naming the file and the key, unless ``--force``.
The history read is this deployment's (:func:`knob_history`): another deployment sharing the
ledger writes its own file.
"""

from __future__ import annotations

from collections.abc import Iterable

from servelab.core.knobs.invisible import escape_invisible
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.redaction import REDACTED, mask
from servelab.errors import CaseError
from servelab.io.hosts.ownrecord import made_by
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Operation
from servelab.ops.knob import knob_owner, read_knob

__all__ = ["knob_history", "refuse_hand_edits"]


def knob_history(
    ledger: Ledger, deployment: LoadedSpec, service: str, knob: str
) -> list[KnobChangeRecord]:
    """The recorded changes of ``service``'s ``knob`` made by the deployment ``deployment``
    (its service's mark, :func:`~servelab.ops.knob.knob_owner`: another spec of the same name
    serving elsewhere is another deployment), oldest first; a change recorded with the name only
    (before marks) counts as this one's when the name is, and one recorded before the ledger
    named its deployment counts as this one's (as it did)."""
    ours = knob_owner(deployment, service)
    rows = ledger.list(KnobChangeRecord, service=service, name=knob)
    return [row for row in rows if made_by(row.deployment, ours)]


def _shown(value: str | None) -> str:
    return "unset" if value is None else escape_invisible(value)


async def refuse_hand_edits(
    op: Operation, ledger: Ledger, knobs: Iterable[tuple[str, str]], *, command: str
) -> None:
    """Raise :class:`CaseError` (exit 2) for the first ``(service, knob)`` whose file value is not
    the one servelab last wrote (its newest recorded change), naming the file and the key; a
    knob with no recorded change, or whose recorded value is masked, is not compared."""
    for service, knob in knobs:
        recorded = knob_history(ledger, op.loaded, service, knob)
        if not recorded:
            continue
        last = max(recorded, key=lambda c: c.id)
        if last.new is not None and REDACTED in last.new:
            continue  # the ledger keeps no value to compare with
        now = await read_knob(op, service, knob)
        if mask(knob, now.value) == last.new:
            continue
        raise CaseError(
            f"{now.path}: {knob} is {_shown(mask(knob, now.value))} there, not "
            f"{_shown(last.new)} as servelab last wrote it (change #{last.id}): the file was "
            f"changed since (edited by hand, or put back by `restart --rollback`); {command} "
            f"would overwrite that. Check the file, then run {command} again with --force to "
            "overwrite it"
        )
