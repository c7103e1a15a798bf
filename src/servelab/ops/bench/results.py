"""A bench run into the ledger: its summary and config encoded by the one codec, its per-request
records in their stored form, its received spans (the only I/O: the ledger's writer)."""

from __future__ import annotations

from servelab.core.bench.contract import BenchConfig, RunResult
from servelab.core.bench.summary import run_summary
from servelab.core.ledger.codec import encode
from servelab.io.ledger.ledger import Ledger

__all__ = ["record_run"]


def record_run(ledger: Ledger, config: BenchConfig, run: RunResult) -> int:
    """Record one run (config, summary: ``encode(run_summary(run))``, every per-request record,
    its received spans) in the ledger; its row id."""
    run.run_id = ledger.record_bench_run(
        label=config.label or None, config=encode(config), summary=encode(run_summary(run)),
        records=[encode(r) for r in run.records],
        spans=() if run.traces is None else run.traces.spans,
    )  # fmt: skip
    return run.run_id
