"""A knob change's ledger record, as the ``knob_changes`` table holds it (pure; stored and read
through :mod:`servelab.core.ledger.codec`)."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.redacted import masked_serializer

__all__ = ["KnobChangeRecord"]


@dataclass(frozen=True)
class KnobChangeRecord:
    """A declared knob's value changed in a service's env file (``None``: absent), by the
    deployment ``deployment``: the service's mark ``name/service@host:port`` (a name alone in a
    change recorded before marks were; None: before the ledger kept it)."""

    _masked = masked_serializer("name", "old", "new")

    id: int
    at: str
    service: str
    name: str
    old: str | None = None
    new: str | None = None
    reason: str | None = None
    case_id: int | None = None
    backup_path: str | None = None
    deployment: str | None = None

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.name}"
