"""A soak's ledger record, as the ``soak_runs`` table (and its ``soak_findings``) holds it
(pure; stored and read through :mod:`servelab.core.ledger.codec`, a row of any age upgraded first
by :func:`~servelab.core.soak.upgrade.upgrade_soak_run`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator

from servelab.core.ledger.codec import decode
from servelab.core.soak.result import SoakResult
from servelab.core.soak.upgrade import upgrade_soak_run

__all__ = ["SoakRunRecord", "StoredSoakRun", "read_soak_run"]


@dataclass(frozen=True)
class SoakRunRecord:
    """A recorded soak: when, whether it passed (the row's ``ok``; None: not known), and its
    result (its config, findings and everything else: codes and numbers, never words)."""

    id: int
    at: str
    ok: bool | None
    result: SoakResult


def read_soak_run(row: Mapping[str, Any]) -> SoakRunRecord:
    """A ``soak_runs`` row (``findings``: its ``soak_findings``) or an export's soak run, of any
    age (:func:`~servelab.core.soak.upgrade.upgrade_soak_run`)."""
    return decode(SoakRunRecord, upgrade_soak_run(row))


#: A soak run inside another record (the ledger's export), of any age, upgraded first.
StoredSoakRun = Annotated[SoakRunRecord, BeforeValidator(upgrade_soak_run)]
