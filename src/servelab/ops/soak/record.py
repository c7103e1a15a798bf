"""A soak's result as the ledger stores it: :class:`~servelab.core.ledger.results.SoakDocument`.

The numbers come from the :class:`~servelab.ops.soak.soak.SoakResult`; the findings come worded
(:func:`servelab.report.soak.soak.soak_finding`), because a person reads them in the ledger's docs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from servelab.core.ledger.results import SoakDocument, SoakFinding, SoakSessions
from servelab.core.soak.observe import Localization
from servelab.ops.soak.soak import SoakResult

__all__ = ["localization_json", "soak_document"]


def localization_json(loc: Localization) -> dict[str, Any]:
    """One localization as stored: its signature, failure, matrix (cells, located layer and
    worker, bisection), the router's metrics, the loads, and its wall time."""
    return {
        "signature": loc.signature,
        "elapsed_s": round(loc.elapsed_s, 3),
        "failure": asdict(loc.failure),
        "matrix": asdict(loc.matrix),
        "router_metrics": None if loc.router_metrics is None else asdict(loc.router_metrics),
        "loads": [asdict(x) for x in loc.loads],
    }


def _sessions(result: SoakResult) -> SoakSessions:
    sessions = result.sessions
    rounds = result.config.rounds
    return SoakSessions(
        count=len(sessions),
        completed=sum(s.rounds_done == rounds for s in sessions),
        rounds_done=sum(s.rounds_done for s in sessions),
        requests=sum(s.requests for s in sessions),
        per_session=tuple(asdict(s) for s in sessions),
    )


def soak_document(result: SoakResult, findings: Sequence[SoakFinding]) -> SoakDocument:
    """The ``soak --json`` document and the ledger's record of ``result``."""
    return SoakDocument(
        ok=result.ok,
        soak_id=result.soak_id,
        model=result.model,
        elapsed_s=round(result.elapsed_s, 3),
        interrupted=result.interrupted,
        deadline_hit=result.deadline_hit,
        config=asdict(result.config),
        targets=asdict(result.targets),
        sessions=_sessions(result),
        stalls=tuple(asdict(s) for s in result.stalls),
        errors=tuple(result.errors),
        correctness=tuple(asdict(i) for i in result.issues),
        determinism=result.determinism,
        localized=result.localized,
        observations=tuple(asdict(o) for o in result.observations),
        findings=tuple(findings),
        failures=tuple(asdict(f) for f in result.failures),
        localizations=tuple(localization_json(x) for x in result.localizations),
        start=None if result.start is None else asdict(result.start),
        undecided=None if result.undecided is None else asdict(result.undecided),
        telemetry=result.telemetry,
        traces=_traces(result),
    )


def _traces(result: SoakResult) -> dict[str, Any] | None:
    if result.phases is None:
        return None
    return {"n_spans": len(result.spans), "requests": [p.to_json() for p in result.phases]}
