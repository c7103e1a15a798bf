"""A verification's ledger record, as the ``verifications`` table holds it (pure).

Its checks have one flat JSON shape, written and read by the codec through :data:`StoredCheck`
wherever a record holds one (a verification, a case's revert, the ledger's export).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import PlainSerializer, PlainValidator

from servelab.core.verify.checks import Check, UntypedCheck, flat_check, read_check

__all__ = ["CheckRecord", "StoredCheck", "StoredVerification", "VerificationRecord"]

#: A check as the ledger holds it: typed (:class:`~servelab.core.verify.checks.Check`), or an
#: older row's sentence or a code this servelab does not know
#: (:class:`~servelab.core.verify.checks.UntypedCheck`).
CheckRecord = Check | UntypedCheck


#: A check inside a record: read by :func:`~servelab.core.verify.checks.read_check` (an older
#: row's shapes too), written in its one flat shape (:func:`~servelab.core.verify.checks.
#: flat_check`), both through the codec.
StoredCheck = Annotated[CheckRecord, PlainValidator(read_check), PlainSerializer(flat_check)]


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
