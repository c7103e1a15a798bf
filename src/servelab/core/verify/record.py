"""A verification's ledger record, as the ``verifications`` table holds it (pure).

A check as stored: typed, or (:class:`UntypedCheck`) an older row's sentence or a code this
servelab does not know; :func:`read_check` and :func:`read_check_row` read either, and the codec
writes a check's one flat JSON shape (``encode(check, StoredCheck)``, :data:`StoredCheck`;
:data:`FlatCheck` where the type holds typed checks only) wherever a record holds one (a
verification, a restart, a case's revert, the ledger's export).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, TypeAlias

from pydantic import JsonValue, PlainSerializer, PlainValidator

from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.jsonvalues import opt_str
from servelab.core.verify.checks import DATA_OF, Check, CheckCode
from servelab.errors import RecordError

__all__ = [
    "CheckRecord",
    "FlatCheck",
    "StoredCheck",
    "StoredVerification",
    "UntypedCheck",
    "VerificationRecord",
    "read_check",
    "read_check_row",
]


#: A check's JSON as stored (its flat shape, or its data alone): JSON values by key, decoded by
#: the codec into the check's data type where its code is known (:func:`read_check`).
CheckJson: TypeAlias = Mapping[str, JsonValue]


@dataclass(frozen=True)
class UntypedCheck:
    """A stored check this servelab cannot type: its ``detail`` (the sentence an older ledger
    stored instead of a code), or its ``code`` (one this servelab does not know, or whose data
    does not fit it), and its data as stored."""

    layer: str
    service: str | None
    ok: bool
    detail: str | None
    data: CheckJson = field(default_factory=dict)
    code: str | None = None

    @property
    def knob(self) -> str | None:
        return opt_str(self.data.get("knob"))

    @property
    def live(self) -> str | None:
        return opt_str(self.data.get("live"))


def _flat_check(check: Check | UntypedCheck) -> CheckJson:
    """A check's one JSON shape, flat: ``{**data, "layer", "service", "ok", "code"}`` (and an
    untyped one's ``detail``); the codec's serializer of a check (:data:`StoredCheck`), read back
    by :func:`read_check`."""
    match check:
        case Check():
            data: CheckJson = encode(check.data)
            return {**data, "layer": check.layer.value, "service": check.service, "ok": check.ok,
                    "code": check.code.value}  # fmt: skip
        case UntypedCheck():
            return {**check.data, "layer": check.layer, "service": check.service, "ok": check.ok,
                    "code": check.code, "detail": check.detail}  # fmt: skip


_FLAT_KEYS = frozenset({"layer", "service", "ok", "code", "detail"})
_CODES = frozenset(code.value for code in CheckCode)


def read_check(stored: object) -> Check | UntypedCheck:
    """A check from its flat JSON (``code`` and the data; an older one: ``detail``, a sentence);
    the codec's validator of a check (:data:`StoredCheck`): anything else is a ValueError."""
    if not isinstance(stored, Mapping):
        raise ValueError(f"a check is a JSON object, not {type(stored).__name__}")
    doc: CheckJson = stored
    layer, service, ok = str(doc.get("layer", "")), opt_str(doc.get("service")), bool(doc.get("ok"))
    data = {key: value for key, value in doc.items() if key not in _FLAT_KEYS}
    code = opt_str(doc.get("code"))
    typed = _typed(service, ok, code, data)
    return typed or UntypedCheck(layer, service, ok, opt_str(doc.get("detail")), data, code)


def read_check_row(
    layer: str, service: str | None, ok: bool, stored: str | None, data: object
) -> Check | UntypedCheck:
    """A check from the ledger's row: ``stored`` (the ``detail`` column) holds its code, or an older
    row's sentence (read as the check's ``detail``); ``data``, the decoded ``data`` column."""
    fields: CheckJson = dict(data) if isinstance(data, Mapping) else {}
    typed = _typed(service, ok, stored, fields)
    return typed or UntypedCheck(layer, service, ok, stored, fields)


def _typed(service: str | None, ok: bool, code: str | None, data: CheckJson) -> Check | None:
    """The typed check, or None when the code is not one of :class:`CheckCode` or the data does
    not fit its type."""
    if service is None or code not in _CODES:
        return None
    known = CheckCode(code)
    try:
        return Check(service, ok, known, decode(DATA_OF[known], data))
    except RecordError:
        return None


#: A check as the ledger holds it: typed (:class:`~servelab.core.verify.checks.Check`), or an
#: older row's sentence or a code this servelab does not know
#: (:class:`~servelab.core.verify.checks.UntypedCheck`).
CheckRecord = Check | UntypedCheck


#: A check inside a record: read by :func:`read_check` (an older row's shapes too), written in its
#: one flat shape, both through the codec.
StoredCheck = Annotated[CheckRecord, PlainValidator(read_check), PlainSerializer(_flat_check)]
#: A typed check inside a result (a verification's, a restart's): written in the same flat shape.
FlatCheck = Annotated[Check, PlainSerializer(_flat_check)]


@dataclass(frozen=True)
class VerificationRecord:
    """A layered verification and its checks (:mod:`servelab.core.verify.checks`); stored and
    read through the codec."""

    id: int
    at: str
    spec_hash: str | None
    ok: bool
    checks: tuple[StoredCheck, ...] = ()


#: A verification inside another record (the ledger's export): the record itself.
StoredVerification = VerificationRecord
