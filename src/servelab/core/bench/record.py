"""A bench run's ledger record, as the ``bench_runs`` table holds it (pure; stored and read
through :mod:`servelab.core.ledger.codec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = ["BenchRunRecord"]


@dataclass(frozen=True)
class BenchRunRecord:
    """A bench run; ``records`` (its per-request records) is None when not read."""

    id: int
    at: str
    label: str | None
    #: JSON, as bench wrote them: its config and its run's summary (types above this layer)
    config: Mapping[str, Any]
    summary: Mapping[str, Any]
    n_records: int = 0
    #: JSON: the per-request records as stored (older ledgers hold other shapes too)
    records: Annotated[tuple[Mapping[str, Any], ...] | None, OMITTED_IF_NONE] = None
    #: when ``ledger prune`` removed its records
    records_pruned_at: Annotated[str | None, OMITTED_IF_NONE] = None
