"""From a soak's failures and localizations to its observations, findings and "why none".

One :class:`~servelab.core.soak.evidence.SoakEvidence` per localization (the failures and stalls
of its signature, its matrix and sources, the engines' start), diagnosed on its own; the first
one also carries the correctness violations and the failures no localization covered. A stall
goes with the localization of its signature (:func:`~servelab.core.soak.signatures.stall`, the
one stall rule). Observation ids of the second and later localizations are scoped with their
signature (``http_5xx:probe.router.readiness``) so each finding points at its own evidence.
Findings of the same layer and worker keep the most confident.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from servelab.core.soak.conviction import Exoneration
from servelab.core.soak.creep import creep_evidence
from servelab.core.soak.diagnose import diagnosis
from servelab.core.soak.evidence import (
    CorrectnessIssue,
    Localization,
    MaskedResend,
    Probe,
    ProbeKind,
    Replay,
    ReplayPath,
    SoakEvidence,
    Stall,
)
from servelab.core.soak.finding import Dropped, Finding
from servelab.core.soak.observation import Observation
from servelab.core.soak.observe import observations
from servelab.core.soak.replay import Cell, Hop, Payload
from servelab.core.soak.signatures import Failure, Signature, stall
from servelab.core.soak.undecided import Undecided, undecided
from servelab.core.telemetry.rules import ServerView, assess, telemetry_observations
from servelab.core.verify.coldstart import StartClass

__all__ = ["Seen", "Verdict", "conclude", "legacy_replays"]


@dataclass(frozen=True)
class Seen:
    """What the soak saw, as the conclusion reads it."""

    via_proxy: bool
    start: StartClass | None
    stalls: Sequence[Stall]
    failures: Sequence[Failure]
    issues: Sequence[CorrectnessIssue]
    localizations: Sequence[Localization]
    #: the soak's run telemetry and the client's view of the same window (None: not watched)
    server: ServerView | None = None
    resends: Sequence[MaskedResend] = ()
    #: the router's answers through the entry carried the request's own id back
    router_echoes: bool = False


@dataclass(frozen=True)
class Verdict:
    """The observations, the findings (most likely first), why there is none, the findings
    dropped as explained, and the layers the conviction rule cleared (none of them a finding)."""

    observations: list[Observation]
    findings: list[Finding]
    undecided: Undecided | None
    dropped: list[Dropped]
    exonerated: list[Exoneration] = field(default_factory=list)


def _pick(cells: tuple[Cell, ...], hop: Hop, payload: Payload) -> Cell | None:
    return next((c for c in cells if c.hop == hop and c.payload == payload and c.stream), None)


def legacy_replays(loc: Localization, via_proxy: bool) -> tuple[list[Replay], list[Probe]]:
    """The matrix's cells read as the replays (``fresh_entry``, ``direct_router``) and the
    router e2e probe that the per-layer rules read."""
    cells = loc.matrix.cells
    fresh = _pick(cells, Hop.FRESH if via_proxy else Hop.ROUTER, Payload.FAILING)
    routed = _pick(cells, Hop.ROUTER, Payload.FAILING) if via_proxy else None
    replays = [
        Replay(path, c.outcome, c.status, c.elapsed_s, c.received_bytes, c.detail)
        for path, c in ((ReplayPath.FRESH_ENTRY, fresh), (ReplayPath.DIRECT_ROUTER, routed))
        if c is not None
    ]
    e2e = _pick(cells, Hop.ROUTER, Payload.MINIMAL)
    probes = []
    if e2e is not None:
        ok = (e2e.ok, e2e.status, e2e.elapsed_s, e2e.detail or e2e.outcome)
        probes.append(Probe(e2e.target, "router", ProbeKind.E2E, *ok))
    return replays, probes


def _evidences(result: Seen) -> list[SoakEvidence]:
    """One evidence per localization (scoped by its signature after the first); the first also
    carries the correctness violations and the failures no localization covered."""
    via, start = result.via_proxy, result.start
    issues, echoes, resends = tuple(result.issues), result.router_echoes, tuple(result.resends)
    locs = result.localizations
    if not locs:
        every = tuple(result.failures)
        return [
            SoakEvidence(via, tuple(result.stalls), issues=issues, failures=every, start=start,
                         resends=resends, router_echoes=echoes)
        ]  # fmt: skip
    covered = {loc.signature for loc in locs}
    resent = next((i for i, loc in enumerate(locs) if loc.signature == Signature.RESENT), 0)
    evs = []
    for i, loc in enumerate(locs):
        sig = loc.signature
        failures = [f for f in result.failures if f.signature == sig]
        if i == 0:
            failures += [f for f in result.failures if f.signature not in covered]
        stalls = [s for s in result.stalls if stall(s.reason, s.phase) == sig]
        replays, e2e = legacy_replays(loc, via)
        evs.append(
            SoakEvidence(
                via, tuple(stalls), tuple(replays), (*loc.probes, *e2e), loc.engines,
                issues if i == 0 else (), tuple(failures), loc.matrix, loc.router_metrics,
                loc.loads, start, None if i == 0 else sig, resends if i == resent else (),
                echoes, loc.pairs,
            )
        )  # fmt: skip
    return evs


def conclude(result: Seen) -> Verdict:
    """Diagnose each localization's evidence; merge the findings. The run's telemetry covers the
    whole soak: it goes with the first evidence (like the correctness violations), unscoped."""
    evidence = (*assess(result.server), *creep_evidence(result.server))
    all_obs: list[Observation] = [*telemetry_observations(evidence)]
    best: dict[tuple[str, str | None], Finding] = {}
    dropped: list[Dropped] = []
    cleared: list[Exoneration] = []
    why = None
    for i, ev in enumerate(_evidences(result)):
        server = result.server if i == 0 else None
        found = diagnosis(ev, server)
        why = why or undecided(ev, found.findings, server)
        all_obs += observations(ev)
        dropped += found.dropped
        cleared += found.exonerated
        for f in found.findings:
            key = (f.layer, f.worker)
            if key not in best or best[key].confidence < f.confidence:
                best[key] = f
    findings = sorted(best.values(), key=lambda f: -f.confidence)
    kept = {(f.layer, f.worker) for f in findings}
    dropped = [d for d in dropped if (d.layer, d.worker) not in kept]
    layers = {f.layer for f in findings}
    cleared = list({(e.layer, e.worker): e for e in cleared if e.layer not in layers}.values())
    return Verdict(all_obs, findings, None if findings else why, dropped, cleared)
