"""A bench run's ledger record, as the ``bench_runs`` table holds it (pure; stored and read
through :mod:`servelab.core.ledger.codec`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from servelab.core.bench.shapes import StoredBenchConfig, StoredRequestRecord, StoredRunSummary
from servelab.core.ledger.codec import OMITTED_IF_NONE, Stored

__all__ = ["BenchRunRecord"]


@dataclass(frozen=True)
class BenchRunRecord:
    """A bench run; ``records`` (its per-request records) is None when not read."""

    id: int
    at: str
    label: str | None
    #: as bench wrote them, of any age: its config and its run's summary
    config: Stored[StoredBenchConfig]
    summary: Stored[StoredRunSummary]
    n_records: int = 0
    #: the per-request records as stored (older ledgers hold other shapes too)
    records: Annotated[tuple[Stored[StoredRequestRecord], ...] | None, OMITTED_IF_NONE] = None
    #: when ``ledger prune`` removed its records
    records_pruned_at: Annotated[str | None, OMITTED_IF_NONE] = None
