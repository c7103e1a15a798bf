"""Every record of a ledger: ``servelab ledger export``'s document, typed (pure).

Each feature keeps its own ledger record beside its other types (``core/<feature>/record.py``:
deploy, knobs, verify, bench, ab, soak, case); this is the one module that imports every
feature's, so it sits on top of core's folders and nothing in core imports it.
:mod:`servelab.io.ledger.ledger` builds it; :mod:`servelab.report.docs` builds the docs from it;
``encode(export)`` is the export's JSON and ``decode(LedgerExport, doc)`` reads one back, both
through :mod:`servelab.core.ledger.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.ab.record import AbRunRecord
from servelab.core.bench.record import BenchRunRecord
from servelab.core.case.record import CaseExport
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.soak.record import StoredSoakRun
from servelab.core.verify.record import StoredVerification

__all__ = ["LedgerExport"]


@dataclass(frozen=True)
class LedgerExport:
    """Every record of a ledger: ``servelab ledger export``'s document, typed."""

    schema_version: int
    path: str
    deployments: tuple[DeploymentRecord, ...] = ()
    knob_changes: tuple[KnobChangeRecord, ...] = ()
    verifications: tuple[StoredVerification, ...] = ()
    bench_runs: tuple[BenchRunRecord, ...] = ()
    ab_runs: tuple[AbRunRecord, ...] = ()
    soak_runs: tuple[StoredSoakRun, ...] = ()
    cases: tuple[CaseExport, ...] = ()
