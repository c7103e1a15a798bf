"""Points of the ledger a bisection starts from, and the changes between two of them (pure).

``case bisect --good POINT --bad POINT`` names two states of the deployment's declared knobs. A
point is

- ``now``: the knobs as their files hold them now (read by ops);
- a time, ISO 8601 (``2026-03-01T12:00:00Z``; no zone: UTC; read into the ledger's form by
  ops): the ledger's knob history then;
- ``verify:ID``: what verification ID found running (each knob's live value, else its file value,
  as its checks recorded them), the history at its time for the knobs it did not check;
- ``backup:PATH``: an env-file backup: the state just before the recorded change that took it
  (the history up to that change); a backup no change names is read by ops (its service's env
  knobs), the rest from the history at the time in its name.

The history is the ledger's ``knob_changes`` rows, every kind of knob alike (an env variable, a
server argument, a config key): a knob's value at a moment is what its last change before then set,
else what its first change after then found (``old``); a knob with no recorded change is not known
there. :func:`changes_between` gives one change per knob whose value differs between the two
states (a knob changed and changed back is no change); a knob not known at both is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.case.bisect import Change
from servelab.core.knobs.record import KnobChangeRecord
from servelab.errors import CaseError

__all__ = [
    "KnobKey",
    "Point",
    "PointKind",
    "backup_time",
    "changes_between",
    "parse_point",
    "values_at",
]

#: A knob of a service: ``(service, name)``.
KnobKey = tuple[str, str]

_STAMP = re.compile(r"\.(?:bak|pre-restart)-(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)(?:\.\d+)?Z\Z")
_TIME = re.compile(r"^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d+)?)?)?(Z|[+-]\d\d:?\d\d)?$")


class PointKind(StrEnum):
    """What a point names."""

    NOW = "now"
    TIME = "time"
    VERIFY = "verify"
    BACKUP = "backup"


@dataclass(frozen=True)
class Point:
    """A point as given: its kind and its value (a time as written, a verification id, a
    path)."""

    kind: PointKind
    value: str = ""

    def __str__(self) -> str:
        return self.value if self.kind is PointKind.TIME else (
            f"{self.kind}:{self.value}" if self.value else str(self.kind)
        )  # fmt: skip


def parse_point(text: str) -> Point:
    """``now``, ``verify:ID``, ``backup:PATH`` or an ISO 8601 time (:class:`CaseError`
    otherwise)."""
    raw = text.strip()
    if raw == "now":
        return Point(PointKind.NOW)
    kind, _, rest = raw.partition(":")
    if kind == "verify" and rest.isascii() and rest.isdigit():
        return Point(PointKind.VERIFY, rest)
    if kind == "backup" and rest:
        return Point(PointKind.BACKUP, rest)
    if _TIME.match(raw) is None:
        raise CaseError(
            f"bad point {text!r}: expected now, verify:ID, backup:PATH or a time such as "
            "2026-03-01T12:00:00Z"
        )
    return Point(PointKind.TIME, raw)


def backup_time(path: str) -> str | None:
    """The time in a backup's name (``decode.env.bak-20260301T120000Z``), as a ledger time."""
    found = _STAMP.search(path)
    if found is None:
        return None
    year, month, day, hour, minute, second = found.groups()
    return f"{year}-{month}-{day}T{hour}:{minute}:{second}.000Z"


def values_at(
    history: Sequence[KnobChangeRecord], *, at: str | None = None, before_id: int | None = None
) -> dict[KnobKey, str | None]:
    """Each knob's value at ledger time ``at`` (changes at or before it applied), or just before
    change ``before_id``; knobs with no recorded change are absent."""
    if (at is None) == (before_id is None):
        raise ValueError("a moment is a time or a change, exactly one")
    out: dict[KnobKey, str | None] = {}
    for change in sorted(history, key=lambda c: c.id):
        key = (change.service, change.name)
        if at is not None:
            applied = change.at <= at
        else:
            applied = before_id is not None and change.id < before_id
        if applied:
            out[key] = change.new
        elif key not in out:
            out[key] = change.old
    return out


def changes_between(
    good: Mapping[KnobKey, str | None],
    bad: Mapping[KnobKey, str | None],
    knobs: Iterable[KnobKey],
) -> tuple[Change, ...]:
    """One change per knob of ``knobs`` known at both states whose values differ, in order."""
    found = []
    for key in dict.fromkeys(knobs):
        if key in good and key in bad and good[key] != bad[key]:
            found.append(Change(key[0], key[1], good[key], bad[key]))
    return tuple(found)
