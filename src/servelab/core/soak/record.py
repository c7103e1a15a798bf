"""A soak's ledger record, as the ``soak_runs`` table (and its ``soak_findings``) holds it
(pure; stored through :mod:`servelab.core.ledger.codec`, a row of any age read by
:func:`read_soak_run`: its result through :func:`~servelab.core.soak.upgrade.read_soak_result`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import BeforeValidator

from servelab.core.ledger.codec import decode
from servelab.core.soak.result import SoakResult
from servelab.core.soak.upgrade import read_soak_result

__all__ = ["SoakRunRecord", "StoredSoakRun", "read_soak_run"]


@dataclass(frozen=True)
class SoakRunRecord:
    """A recorded soak: when, whether it passed (the row's ``ok``; None: not known), and its
    result (its config, findings and everything else: codes and numbers, never words)."""

    id: int
    at: str
    ok: bool | None
    result: SoakResult


@dataclass(frozen=True)
class _RowHead:
    """A row's own columns, read by the codec (its result is read apart, of any age)."""

    id: int
    at: str
    ok: bool | None = None


def read_soak_run(row: object) -> SoakRunRecord:
    """A ``soak_runs`` row (decoded JSON columns; ``findings``: its ``soak_findings``) or an
    export's soak run, of any age; a value that does not fit is a RecordError."""
    head = decode(_RowHead, row)
    fields = row if isinstance(row, Mapping) else {}
    got = fields.get("result"), fields.get("config"), fields.get("findings")
    return SoakRunRecord(head.id, head.at, head.ok, read_soak_result(*got))


#: A soak run inside another record (the ledger's export), of any age, read by
#: :func:`read_soak_run` first.
StoredSoakRun = Annotated[SoakRunRecord, BeforeValidator(read_soak_run)]
