"""From a soak's failures and localizations to its observations, findings and "why none".

One :class:`~servelab.core.soak.diagnose.Evidence` per localization (the failures and stalls of its
signature, its matrix and sources, the engines' start), diagnosed on its own; the first one also
carries the correctness violations and the failures no localization covered. Observation ids of
the second and later localizations are prefixed with their signature (``http_5xx:probe.router.
readiness``) so each finding points at its own evidence. Findings of the same layer and worker
keep the most confident.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from servelab.core.soak.diagnose import (
    CorrectnessIssue,
    Evidence,
    Finding,
    Observation,
    Probe,
    Replay,
    ServerView,
    Stall,
    Undecided,
    diagnose,
    observations,
    undecided,
)
from servelab.core.soak.observe import Localization
from servelab.core.soak.replay import FAILING, HOP_FRESH, HOP_ROUTER, MINIMAL, Cell
from servelab.core.soak.signatures import STALLS, Failure
from servelab.core.telemetry.rules import assess, telemetry_observations
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


@dataclass(frozen=True)
class Verdict:
    """The observations, the findings (most likely first), and why there is none."""

    observations: list[Observation]
    findings: list[Finding]
    undecided: Undecided | None


def _pick(cells: tuple[Cell, ...], hop: str, payload: str) -> Cell | None:
    return next((c for c in cells if c.hop == hop and c.payload == payload and c.stream), None)


def legacy_replays(loc: Localization, via_proxy: bool) -> tuple[list[Replay], list[Probe]]:
    """The matrix's cells read as the replays (``fresh_entry``, ``direct_router``) and the
    router e2e probe that the per-layer rules read."""
    cells = loc.matrix.cells
    fresh = _pick(cells, HOP_FRESH if via_proxy else HOP_ROUTER, FAILING)
    routed = _pick(cells, HOP_ROUTER, FAILING) if via_proxy else None
    replays = [
        Replay(path, c.outcome, c.status, c.elapsed_s, c.received_bytes, c.detail)
        for path, c in (("fresh_entry", fresh), ("direct_router", routed))
        if c is not None
    ]
    e2e = _pick(cells, HOP_ROUTER, MINIMAL)
    probes = []
    if e2e is not None:
        ok = (e2e.ok, e2e.status, e2e.elapsed_s, e2e.detail or e2e.outcome)
        probes.append(Probe(e2e.target, "router", "e2e", *ok))
    return replays, probes


def _evidences(result: Seen) -> list[Evidence]:
    via, start = result.via_proxy, result.start
    issues = tuple(result.issues)
    locs = result.localizations
    if not locs:
        every = tuple(result.failures)
        return [Evidence(via, tuple(result.stalls), issues=issues, failures=every, start=start)]
    covered = {loc.signature for loc in locs}
    evs = []
    for i, loc in enumerate(locs):
        sig = loc.signature
        failures = [f for f in result.failures if f.signature == sig]
        if i == 0:
            failures += [f for f in result.failures if f.signature not in covered]
        stalls = [s for s in result.stalls if sig in STALLS and _stall_sig(s.phase) == sig]
        replays, e2e = legacy_replays(loc, via)
        evs.append(
            Evidence(
                via, tuple(stalls), tuple(replays), (*loc.probes, *e2e), loc.engines,
                issues if i == 0 else (), tuple(failures), loc.matrix, loc.router_metrics,
                loc.loads, start,
            )
        )  # fmt: skip
    return evs


def _stall_sig(phase: str) -> str:
    return STALLS[0] if phase == "head" else STALLS[1]


def _prefixed(
    obs: list[Observation], found: list[Finding], prefix: str
) -> tuple[list[Observation], list[Finding]]:
    if not prefix:
        return obs, found
    obs = [replace(o, id=prefix + o.id) for o in obs]
    found = [
        replace(
            f,
            supporting=tuple(prefix + i for i in f.supporting),
            contradicting=tuple(prefix + i for i in f.contradicting),
        )
        for f in found
    ]
    return obs, found


def conclude(result: Seen) -> Verdict:
    """Diagnose each localization's evidence; merge the findings. The run's telemetry covers the
    whole soak: it goes with the first evidence (like the correctness violations), unprefixed."""
    all_obs: list[Observation] = telemetry_observations(assess(result.server))
    best: dict[tuple[str, str | None], Finding] = {}
    why = None
    for i, ev in enumerate(_evidences(result)):
        server = result.server if i == 0 else None
        found = diagnose(ev, server)
        why = why or undecided(ev, found, server)
        prefix = "" if i == 0 else f"{result.localizations[i].signature}:"
        obs, found = _prefixed(observations(ev), found, prefix)
        all_obs += obs
        for f in found:
            key = (f.layer, f.worker)
            if key not in best or best[key].confidence < f.confidence:
                best[key] = f
    findings = sorted(best.values(), key=lambda f: -f.confidence)
    return Verdict(all_obs, findings, None if findings else why)
