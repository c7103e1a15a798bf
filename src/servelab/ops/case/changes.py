"""The changes ``case bisect`` searches (:mod:`servelab.ops.case.bisect`): every declared knob whose
value differs between two points of the ledger (:mod:`servelab.core.case.points`: ``now``, a time,
``verify:ID``, ``backup:PATH``). A point's values come from the knob history, a verification's
file and live checks, a backup's file, or the deployment now.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from datetime import UTC, datetime

from servelab.core.case.bisect import Change
from servelab.core.case.points import (
    KnobKey,
    Point,
    PointKind,
    backup_time,
    changes_between,
    parse_point,
    values_at,
)
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import check_knob_name, parse_env_bytes
from servelab.core.verify.checks import Check, KnobInFile, KnobLive
from servelab.core.verify.record import VerificationRecord
from servelab.errors import CaseError, HostError
from servelab.io.hosts.envfiles import MAX_FILE_BYTES
from servelab.io.ledger.ledger import Ledger
from servelab.ops.arguments import argument_knob
from servelab.ops.context import Operation, SpecOrOperation, operation
from servelab.ops.knob import get_knob

__all__ = ["check_changes", "find_changes"]


def _declared(op: Operation) -> list[KnobKey]:
    return [(name, knob) for name, svc in op.spec.services.items() for knob in svc.knobs]


def _ledger_time(text: str) -> str:
    """An ISO 8601 time as the ledger writes its times (UTC, milliseconds, ``Z``; no zone: UTC)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CaseError(f"{text!r} is not a time (2026-03-01T12:00:00Z)") from None
    moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def _backup_values(
    op: Operation, path: str, history: Sequence[KnobChangeRecord]
) -> dict[KnobKey, str | None]:
    """A backup no recorded change names: its service's env knobs from the file, the rest from
    the history at the time in its name."""
    at = backup_time(path)
    out = values_at(history, at=at) if at is not None else {}
    base = posixpath.basename(path)
    for service in op.spec.services:
        env = op.env_path(service)
        if env is None or not base.startswith(posixpath.basename(env) + "."):
            continue
        try:
            data = await op.host(service).read_file(path, limit=MAX_FILE_BYTES)
            parsed = parse_env_bytes(data, path)
        except HostError as exc:
            raise CaseError(f"cannot read the backup {path}: {exc}") from exc
        for knob in op.spec.services[service].knobs:
            if argument_knob(op, knob).is_env:
                out[(service, knob)] = parsed.get(knob)
        return out
    raise CaseError(f"{path} is not a backup of any service's env file")


async def _values(
    op: Operation, ledger: Ledger, point: Point, history: Sequence[KnobChangeRecord]
) -> dict[KnobKey, str | None]:
    """The declared knobs' values at ``point`` (a knob not known there is absent)."""
    match point.kind:
        case PointKind.NOW:
            return {key: await get_knob(op, *key) for key in _declared(op)}
        case PointKind.TIME:
            return values_at(history, at=_ledger_time(point.value))
        case PointKind.VERIFY:
            found = ledger.get(VerificationRecord, int(point.value))
            if found is None:
                raise CaseError(f"no verification {point.value} in {ledger.path}")
            out = values_at(history, at=found.at)
            checks = [c for c in found.checks if isinstance(c, Check)]
            out |= {(c.service, c.data.knob): c.data.file for c in checks
                    if isinstance(c.data, KnobInFile)}  # fmt: skip
            out |= {(c.service, c.data.knob): c.data.live for c in checks
                    if isinstance(c.data, KnobLive)}  # fmt: skip
            return out
        case PointKind.BACKUP:
            took = next((c for c in history if c.backup_path == point.value), None)
            if took is not None:
                return values_at(history, before_id=took.id)
            return await _backup_values(op, point.value, history)


async def find_changes(
    target: SpecOrOperation, ledger: Ledger, good: str, bad: str = "now"
) -> tuple[Change, ...]:
    """Every declared knob whose value differs between points ``good`` and ``bad``."""
    history = ledger.list(KnobChangeRecord)
    async with operation(target, ledger=ledger) as op:
        before = await _values(op, ledger, parse_point(good), history)
        after = await _values(op, ledger, parse_point(bad), history)
        return changes_between(before, after, _declared(op))


def check_changes(spec: DeploymentSpec, changes: Sequence[Change]) -> None:
    """Refuse (``case bisect``, before anything is recorded) a change of a knob the spec does
    not declare, or two changes of one knob."""
    seen: set[tuple[str, str]] = set()
    for change in changes:
        check_knob_name(spec, change.service, change.knob)
        key = (change.service, change.knob)
        if key in seen:
            raise CaseError(f"{change.service}/{change.knob} is changed twice; list it once")
        seen.add(key)
