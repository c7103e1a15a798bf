"""A verification's ledger record, as the ``verifications`` table holds it (pure).

Its checks read and write their own JSON (``from_row``/``to_json``, :mod:`servelab.core.verify.
checks`) until they go through the codec: :data:`StoredCheck` and :data:`StoredVerification` make
the codec of :mod:`servelab.core.ledger.codec` call theirs where another record holds one (a
case's revert, the ledger's export).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator

from servelab.core.ledger.codec import JsonObject
from servelab.core.ledger.jsonvalues import objs
from servelab.core.verify.checks import Check, UntypedCheck, read_check

__all__ = ["CheckRecord", "StoredCheck", "StoredVerification", "VerificationRecord"]

#: A check as the ledger holds it: typed (:class:`~servelab.core.verify.checks.Check`), or an
#: older row's sentence or a code this servelab does not know
#: (:class:`~servelab.core.verify.checks.UntypedCheck`).
CheckRecord = Check | UntypedCheck


@dataclass(frozen=True)
class VerificationRecord:
    """A layered verification and its checks (:mod:`servelab.core.verify.checks`)."""

    id: int
    at: str
    spec_hash: str | None
    ok: bool
    checks: tuple[CheckRecord, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> VerificationRecord:
        checks = tuple(read_check(c) for c in objs(row.get("checks")))
        return cls(int(row["id"]), str(row["at"]), row.get("spec_hash"), bool(row["ok"]), checks)

    def to_json(self) -> JsonObject:
        return {
            "id": self.id,
            "at": self.at,
            "spec_hash": self.spec_hash,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
        }


#: A check inside another record, read and written by its own reader and ``to_json``.
StoredCheck = Annotated[
    CheckRecord, PlainValidator(read_check), PlainSerializer(lambda check: check.to_json())
]
#: A verification inside another record (the ledger's export), the same way.
StoredVerification = Annotated[
    VerificationRecord,
    PlainValidator(VerificationRecord.from_row),
    PlainSerializer(VerificationRecord.to_json),
]
