"""Localization: evidence in, findings out (pure rules; wording lives in ``report.soak``).

The evidence is :mod:`servelab.core.soak.evidence`, its numbered facts
:mod:`servelab.core.soak.observe`; :func:`diagnose` applies one rule per layer and returns
:class:`Finding` s, most likely first. The rules select facts by their type and fields; a finding
names the observations that support it and those that contradict it by their ids, and the worker
when one is singled out; every finding then meets the conviction rule
(:mod:`servelab.core.soak.conviction`), which keeps the layers it clears apart. When the
replay matrix (:mod:`servelab.core.soak.replay`) located the failure, its layer's finding
carries the matrix cells (the first hop at which the same payload goes from working to
failing); a failure the matrix could not reproduce convicts no proxy. When failures were seen
and nothing is found, :func:`servelab.core.soak.undecided.undecided` says
why: the observations that conflict, the sources that stayed unknown, and the probe that would
tell them apart. A finding whose observations a stronger finding further
out explains (the same payload worked at the hops inside the located one, or the failed answers
came from in front of the router) is dropped, and :class:`Dropped` says by which and why.

Confidence (a score in [0, 1], not a probability): each rule has a base; every supporting
observation beyond the ones its gate needs adds ``_SUPPORT_STEP``, every contradicting one removes
``_CONTRA_STEP``; the result is clipped to [0.05, 0.99]. No failure and no violation: no finding,
except the run telemetry's ``client`` rule (the client did not receive what the decodes counted).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar

from servelab.core.soak.conviction import (
    LAYER_DEPTH,
    Exoneration,
    at_layer,
    corroborates,
    exoneration,
)
from servelab.core.soak.creep import creep_evidence, crept
from servelab.core.soak.evidence import EngineActivity, ProbeKind, ReplayPath, SoakEvidence
from servelab.core.soak.observation import (
    CorrectnessViolations,
    EngineProgress,
    FreshConnectionStalls,
    FrontAnswers,
    MatrixBisection,
    MatrixCell,
    Observation,
    PairMismatch,
    ProbeResult,
    ReplayResult,
    Resends,
    ReusedConnectionStalls,
    SignatureFailures,
    Stalls,
    TransferFailures,
)
from servelab.core.soak.observe import observations
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import (
    FIRED,
    WORKERS,
    ServerView,
    TelemetryEvidence,
    assess,
    telemetry_observations,
)
from servelab.core.verify.coldstart import Start

__all__ = ["Diagnosis", "DropReason", "Dropped", "Finding", "diagnose", "diagnosis"]

#: the layers router-counted worker errors (``points_at == WORKERS``) support
_ENGINE_LAYERS = (Layer.PREFILL, Layer.DECODE_TRANSFER, Layer.ENGINE_WEDGE)
#: the layers server-side evidence of a fault contradicts (it is not only the client side)
_CLIENT_SIDE = (Layer.CLIENT_PROXY,)
_ORDER = tuple(Layer)
_TELEMETRY_BASE = 0.5

_SUPPORT_STEP = 0.05
_CONTRA_STEP = 0.2
_MATRIX_BASE = 0.75

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Finding:
    """A suspected layer with its confidence, the observations (ids) for and against it, and
    the worker (service name or URL) when one is singled out."""

    layer: Layer
    confidence: float
    supporting: tuple[str, ...]
    contradicting: tuple[str, ...]
    worker: str | None = None


class DropReason(StrEnum):
    """Why a finding was dropped: a stronger one, on a hop further out, explains its
    observations."""

    INNER_HOP_WORKED = "inner_hop_worked"  # the same payload worked at the hops inside
    ANSWERED_IN_FRONT = "answered_in_front"  # the failed answers came from in front of the router


@dataclass(frozen=True, slots=True)
class Dropped:
    """A finding left out: its layer, worker and confidence, the finding that explains it
    (``by``), why, and the observations (ids) that show it."""

    layer: Layer
    confidence: float
    by: Layer
    reason: DropReason
    because: tuple[str, ...]
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The findings (most likely first), those dropped as explained by a stronger one, and the
    layers the conviction rule cleared (:mod:`servelab.core.soak.conviction`)."""

    findings: tuple[Finding, ...]
    dropped: tuple[Dropped, ...] = ()
    exonerated: tuple[Exoneration, ...] = ()


# ------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class _View:
    """Lookups the rules share: the evidence, and its facts by id (in the order observed)."""

    ev: SoakEvidence
    obs: Mapping[str, Observation]

    def of(self, kind: type[T]) -> list[T]:
        return [o for o in self.obs.values() if isinstance(o, kind)]

    def replay(self, path: ReplayPath) -> ReplayResult | None:
        return next((o for o in self.of(ReplayResult) if o.replay.path == path), None)

    def probes(self, *kinds: ProbeKind, healthy: bool | None = None) -> list[str]:
        """Ids of the probes of ``kinds`` (every kind when none is given) that were ``healthy``
        (either way when None)."""
        return [
            o.id
            for o in self.of(ProbeResult)
            if (not kinds or o.probe.kind in kinds) and (healthy is None or o.healthy is healthy)
        ]

    def engine_metrics(self, healthy: bool) -> list[str]:
        """Ids of every engine's progress and transfer failures that were ``healthy``."""
        found = [o for o in self.obs.values() if isinstance(o, EngineProgress | TransferFailures)]
        return [o.id for o in found if o.healthy is healthy]

    def worker_health(self, role: str, healthy: bool) -> list[str]:
        return [
            o.id
            for o in self.of(ProbeResult)
            if o.probe.kind == ProbeKind.HEALTH and o.probe.role == role and o.healthy is healthy
        ]

    def engines(self, role: str) -> list[EngineActivity]:
        return [e for e in self.known if e.role == role]

    @property
    def known(self) -> list[EngineActivity]:
        """Engines whose /metrics answered both scrapes (the others are unknown)."""
        return [e for e in self.ev.engines if e.known]

    def progress_id(self, engine: EngineActivity) -> str:
        return next(o.id for o in self.of(EngineProgress) if o.subject == engine.service)

    def engine_ids(self, engine: EngineActivity) -> set[str]:
        """Ids of the engine's progress and its transfer failures."""
        about = [o for o in self.obs.values() if isinstance(o, EngineProgress | TransferFailures)]
        return {o.id for o in about if o.subject == engine.service}

    def cell_ids(self) -> dict[str, str]:
        """Each matrix cell's own id → its observation's id (scoped)."""
        return {o.cell.id: o.id for o in self.of(MatrixCell)}

    def ids(self, healthy: bool) -> list[str]:
        return [o.id for o in self.obs.values() if o.healthy is healthy]


def _finding(
    layer: Layer, base: float, gate: list[str], extra: list[str], contra: list[str]
) -> Finding:
    support = list(dict.fromkeys([*gate, *extra]))
    against = list(dict.fromkeys(c for c in contra if c not in support))
    score = base + _SUPPORT_STEP * len(extra) - _CONTRA_STEP * len(against)
    return Finding(layer, round(min(0.99, max(0.05, score)), 2), tuple(support), tuple(against))


def _all_health(v: _View, healthy: bool) -> list[str]:
    return [*v.worker_health("prefill", healthy), *v.worker_health("decode", healthy)]


def _cold_first_requests(v: _View) -> bool:
    """The engines were cold and every stall was a connection's first request."""
    start = v.ev.start
    cold = start is not None and start.start == Start.COLD
    return cold and all(s.connection_requests == 0 for s in v.ev.stalls)


def _rule_client_proxy(v: _View) -> Finding | None:
    stalls, fresh = v.of(Stalls), v.replay(ReplayPath.FRESH_ENTRY)
    if not stalls or fresh is None or not fresh.healthy or _cold_first_requests(v):
        return None
    gate = [stalls[0].id, fresh.id]
    extra = [o.id for o in v.of(ReusedConnectionStalls)]
    contra = [o.id for o in v.of(FreshConnectionStalls)]
    router = v.replay(ReplayPath.DIRECT_ROUTER)
    if router is not None:
        (extra if router.healthy else contra).append(router.id)
    extra += v.probes(healthy=True) + v.engine_metrics(True)
    contra += v.probes(healthy=False) + v.engine_metrics(False)
    base = 0.6 if v.ev.via_proxy else 0.35
    return _finding(Layer.CLIENT_PROXY, base, gate, extra, contra)


def _rule_front_answers(v: _View) -> Finding | None:
    """Failed answers that came from in front of the router place the failure there alone."""
    front = v.of(FrontAnswers)
    if not front:
        return None
    gate = [front[0].id]
    extra = [o.id for o in v.of(Resends)]
    router = v.replay(ReplayPath.DIRECT_ROUTER)
    if router is not None and router.healthy:
        extra.append(router.id)
    return _finding(Layer.CLIENT_PROXY, 0.6, gate, extra, [])


def _through_router_failed(v: _View) -> list[str]:
    """Ids showing the router path itself fails (direct replay, or the e2e probe)."""
    direct, fresh = v.replay(ReplayPath.DIRECT_ROUTER), v.replay(ReplayPath.FRESH_ENTRY)
    ids = [direct.id] if direct is not None and not direct.healthy else []
    ids += v.probes(ProbeKind.E2E, healthy=False)
    if not v.ev.via_proxy and fresh is not None and not fresh.healthy:
        ids.append(fresh.id)
    return ids


def _rule_router(v: _View) -> Finding | None:
    failed = _through_router_failed(v)
    if not failed:
        return None
    router_probes = v.probes(ProbeKind.READINESS, ProbeKind.WORKERS, healthy=False)
    nothing_arrived = bool(v.known) and not any(e.received for e in v.known)
    engines_idle = [v.progress_id(e) for e in v.known if not e.busy and not e.received]
    if not router_probes and not nothing_arrived:
        return None
    gate = failed + router_probes + (engines_idle if nothing_arrived else [])
    extra = _all_health(v, True)
    contra = _all_health(v, False) + [v.progress_id(e) for e in v.known if e.received]
    return _finding(Layer.ROUTER, 0.5, gate, extra, contra)


def _rule_prefill(v: _View) -> Finding | None:
    sick = v.worker_health("prefill", False)
    if not sick or not (v.ev.stalls or _through_router_failed(v)):
        return None
    extra = _through_router_failed(v) + v.worker_health("decode", True)
    contra = [v.progress_id(e) for e in v.engines("prefill") if e.generating]
    return _finding(Layer.PREFILL, 0.6, sick, extra, contra)


def _rule_decode_transfer(v: _View) -> Finding | None:
    failed = _through_router_failed(v)
    transfer = [o.id for o in v.of(TransferFailures) if o.healthy is False]
    decode_stuck = [
        v.progress_id(e)
        for e in v.engines("decode")
        if (e.frozen or (e.received and not e.generating)) and e.in_transfer != 0
    ]
    prefill_done = [v.progress_id(e) for e in v.engines("prefill") if e.received and not e.frozen]
    sick = v.worker_health("decode", False)
    if not (failed and (transfer or sick or (decode_stuck and prefill_done))):
        return None
    gate = failed + transfer + sick + (decode_stuck + prefill_done if not sick else [])
    extra = v.worker_health("prefill", True) + v.worker_health("decode", True)
    extra += [o.id for o in v.of(FreshConnectionStalls)]
    replays = [v.replay(ReplayPath.FRESH_ENTRY), v.replay(ReplayPath.DIRECT_ROUTER)]
    contra = [r.id for r in replays if r is not None and r.healthy]
    return _finding(Layer.DECODE_TRANSFER, 0.6, gate, extra, contra)


def _rule_engine_wedge(v: _View) -> Finding | None:
    frozen = [e for e in v.known if e.frozen]
    healthy = _all_health(v, True)
    if not frozen or not healthy or not _through_router_failed(v):
        return None
    frozen_ids = [v.progress_id(e) for e in frozen]
    gate = frozen_ids + healthy + _through_router_failed(v)
    # A frozen decode right after a prefill that kept serving points at the transfer path instead.
    prefill_done = [v.progress_id(e) for e in v.engines("prefill") if e.received and not e.frozen]
    only_decode = all(e.role == "decode" and e.in_transfer != 0 for e in frozen)
    contra = prefill_done if only_decode else []
    contra += _all_health(v, False)
    return _finding(Layer.ENGINE_WEDGE, 0.45, gate, [], contra)


def _rule_pd_pair(v: _View) -> Finding | None:
    """A prefill and decode that disagree on what the KV hand-off carries explain failed
    requests through the router (a hang or an error) better than any layer's symptom."""
    mismatched = [o.id for o in v.of(PairMismatch)]
    failed = _through_router_failed(v) + [o.id for o in v.of(SignatureFailures)]
    if not mismatched or not (failed or v.ev.stalls or v.ev.failures):
        return None
    extra = [o.id for o in v.of(TransferFailures) if o.healthy is False] + _all_health(v, True)
    return _finding(Layer.PD_PAIR, 0.9, mismatched, extra + failed, [])


def _rule_correctness(v: _View) -> Finding | None:
    ids = [o.id for o in v.of(CorrectnessViolations) if o.healthy is False]
    if not ids:
        return None
    at_kv = any(o.issue == "answer_kv_transfer" for o in v.of(CorrectnessViolations))
    layer = Layer.DECODE_TRANSFER if at_kv else Layer.CORRECTNESS  # answers wrong from the KV
    return _finding(layer, 0.85, ids, ids[1:], [])


_RULES: tuple[Callable[[_View], Finding | None], ...] = (
    _rule_client_proxy,
    _rule_front_answers,
    _rule_router,
    _rule_prefill,
    _rule_decode_transfer,
    _rule_engine_wedge,
    _rule_correctness,
    _rule_pd_pair,
)


def _only(services: list[str]) -> str | None:
    unique = list(dict.fromkeys(services))
    return unique[0] if len(unique) == 1 else None


def _worker(v: _View, f: Finding) -> str | None:
    """The one worker a per-layer finding points at (None: not one)."""
    if f.layer == Layer.PD_PAIR:
        return _only([o.subject for o in v.of(PairMismatch)])
    probes = v.of(ProbeResult)
    if f.layer == Layer.PREFILL:
        return _only([o.subject for o in probes if o.probe.role == "prefill" and not o.healthy])
    if f.layer == Layer.DECODE_TRANSFER:
        ids = set(f.supporting)
        return _only(
            [e.service for e in v.engines("decode") if v.engine_ids(e) & ids]
            + [o.subject for o in probes if o.probe.role == "decode" and not o.healthy]
        )
    if f.layer == Layer.ENGINE_WEDGE:
        return _only([e.service for e in v.known if e.frozen])
    return None


def _corroboration(v: _View, layer: Layer, worker: str | None) -> list[str]:
    """Observations outside the matrix that agree with the matrix's layer (and worker)."""
    mine = [o for o in v.obs.values() if o.healthy is False and (worker is None or o.subject in
            (worker, "entry", "router"))]  # fmt: skip
    found = [o.id for o in mine if corroborates(o, layer)]
    direct = v.replay(ReplayPath.DIRECT_ROUTER)
    if layer == Layer.CLIENT_PROXY and direct is not None and direct.healthy:
        found.append(direct.id)
    return found


def _matrix_finding(v: _View) -> Finding | None:
    matrix = v.ev.matrix
    if matrix is None or matrix.located.layer is None:
        return None
    loc, cells = matrix.located, v.cell_ids()
    gate = [cells.get(i, i) for i in (*loc.failing, *loc.working)]
    extra = _corroboration(v, matrix.located.layer, loc.worker)
    extra += [o.id for o in v.of(MatrixBisection)]
    contra = [cells.get(i, i) for i in loc.conflicting]
    f = _finding(matrix.located.layer, _MATRIX_BASE, gate, extra, contra)
    return replace(f, worker=loc.worker)


def _merge(found: list[Finding], located: Finding) -> list[Finding]:
    """The matrix's finding joined with the rule of the same layer (supports first)."""
    same = [f for f in found if f.layer == located.layer]
    rest = [f for f in found if f.layer != located.layer]
    for f in same:
        support = tuple(dict.fromkeys([*f.supporting, *located.supporting]))
        against = tuple(c for c in f.contradicting if c not in support)
        located = Finding(
            located.layer,
            max(f.confidence, located.confidence),
            support,
            against,
            located.worker or f.worker,
        )
    return [*rest, located]


# ------------------------------------------------------------------------------- telemetry
def _supports(e: TelemetryEvidence, f: Finding) -> bool:
    if e.state != FIRED:
        # A quiet router proves little: a failure inside a stream passes it as a 200.
        return False
    if e.worker is not None and f.worker is not None and e.worker != f.worker:
        return False
    if e.points_at == WORKERS:
        return f.layer in _ENGINE_LAYERS
    return e.points_at == f.layer or (e.points_at == Layer.CLIENT and f.layer in _CLIENT_SIDE)


def _contradicts(e: TelemetryEvidence, f: Finding) -> bool:
    """Server-side evidence of a fault contradicts a finding that blames only the client side."""
    return e.state == FIRED and e.points_at != Layer.CLIENT and f.layer in _CLIENT_SIDE


def _with_telemetry(f: Finding, evidence: tuple[TelemetryEvidence, ...]) -> Finding:
    support = [e.id for e in evidence if _supports(e, f) and e.id not in f.supporting]
    against = [e.id for e in evidence if _contradicts(e, f) and e.id not in f.contradicting]
    if not support and not against:
        return f
    score = f.confidence + _SUPPORT_STEP * len(support) - _CONTRA_STEP * len(against)
    return replace(
        f, confidence=round(min(0.99, max(0.05, score)), 2),
        supporting=(*f.supporting, *support), contradicting=(*f.contradicting, *against),
    )  # fmt: skip


def _fired_layer(e: TelemetryEvidence) -> Layer | None:
    """The layer a fired rule points at (None: quiet, unknown, or :data:`WORKERS`)."""
    return e.points_at if e.state == FIRED and isinstance(e.points_at, Layer) else None


def _telemetry_findings(
    found: list[Finding], evidence: tuple[TelemetryEvidence, ...], failed: bool
) -> list[Finding]:
    """A finding of its own for a fired rule whose layer no other rule found: the client and the
    creep rules always (decay shows before anything fails), the others when requests failed."""
    out: list[Finding] = []
    layers = [layer for e in evidence if (layer := _fired_layer(e)) is not None]
    for layer in dict.fromkeys(layers):
        known = any(f.layer == layer for f in [*found, *out])
        if known or (layer != Layer.CLIENT and not failed and not crept(evidence, layer)):
            continue
        ids = [e.id for e in evidence if _fired_layer(e) == layer]
        workers = {e.worker for e in evidence if e.id in ids}
        f = _finding(layer, _TELEMETRY_BASE, ids[:1], ids[1:], [])
        out.append(replace(f, worker=next(iter(workers)) if len(workers) == 1 else None))
    return out


def _explanation(v: _View, found: list[Finding]) -> tuple[Finding, DropReason, list[str]] | None:
    """The finding further out that explains the others, why, and the observations showing it:
    the matrix located a hop outside the router with the same payload working inside it, or the
    failed answers came from in front of the router."""
    proxy = next((f for f in found if f.layer == Layer.CLIENT_PROXY), None)
    if proxy is None:
        return None
    matrix = v.ev.matrix
    if matrix is not None and matrix.located.layer == Layer.CLIENT_PROXY:
        cells = v.cell_ids()
        return proxy, DropReason.INNER_HOP_WORKED, [cells.get(i, i) for i in matrix.located.working]
    front = v.of(FrontAnswers)
    if front:
        return proxy, DropReason.ANSWERED_IN_FRONT, [front[0].id]
    return None


def _drop_explained(v: _View, found: list[Finding]) -> tuple[list[Finding], list[Dropped]]:
    """Findings of hops inside the one a stronger finding located (and that no failed cell of
    their own supports) are dropped, saying which finding explains them and why."""
    explained = _explanation(v, found)
    if explained is None:
        return found, []
    by, reason, because = explained
    cells = set(v.cell_ids().values())
    kept, dropped = [], []
    for f in found:
        inner = LAYER_DEPTH.get(f.layer, LAYER_DEPTH[by.layer]) < LAYER_DEPTH[by.layer]
        if inner and not cells & set(f.supporting):
            dropped.append(
                Dropped(f.layer, f.confidence, by.layer, reason, tuple(because), f.worker)
            )
        else:
            kept.append(f)
    return kept, dropped


def _convict(
    v: _View, found: list[Finding], evidence: tuple[TelemetryEvidence, ...]
) -> tuple[list[Finding], list[Exoneration]]:
    """The conviction rule on every finding: kept, or cleared saying why."""
    matrix = v.ev.matrix
    located = None if matrix is None else matrix.located
    kept, cleared = [], []
    for f in found:
        direct = [o.id for o in v.obs.values() if o.healthy is False and at_layer(o, f.layer)]
        direct += [e.id for e in evidence if _supports(e, f)]
        gone = exoneration(f, located, direct, v.cell_ids())
        if gone is None:
            kept.append(f)
        else:
            cleared.append(gone)
    return kept, cleared


def diagnosis(ev: SoakEvidence, server: ServerView | None = None) -> Diagnosis:
    """Apply every rule; findings sorted by confidence (then by the order of
    :class:`~servelab.core.telemetry.layers.Layer`), and those a stronger finding further out
    explains, dropped. ``server``: the run's telemetry (:mod:`servelab.core.telemetry.rules`)
    supports or contradicts the findings, and gives findings of its own."""
    evidence = (*assess(server), *creep_evidence(server))
    obs = [*observations(ev), *telemetry_observations(evidence)]
    view = _View(ev, {o.id: o for o in obs})
    found = [f for f in (rule(view) for rule in _RULES) if f is not None]
    found = [replace(f, worker=_worker(view, f)) for f in found]
    if ev.matrix is not None and ev.matrix.located.layer is None:
        # The same payload worked on a fresh connection and everywhere else: nothing reproduced,
        # so no connection layer is convicted on the fresh replay alone.
        own = bool(view.of(ReusedConnectionStalls) or view.of(FrontAnswers))
        found = [f for f in found if f.layer != Layer.CLIENT_PROXY or own]
    located = _matrix_finding(view)
    if located is not None:
        found = _merge(found, located)
    failed = bool(ev.failures or ev.stalls or ev.issues)
    found += _telemetry_findings(found, evidence, failed)
    found, dropped = _drop_explained(view, found)
    gone = {d.layer for d in dropped}
    kept = tuple(e for e in evidence if _fired_layer(e) not in gone)
    found = [_with_telemetry(f, kept) for f in found]
    found, cleared = _convict(view, found, kept)
    ranked = sorted(found, key=lambda f: (-f.confidence, _ORDER.index(f.layer)))
    return Diagnosis(tuple(ranked), tuple(dropped), tuple(cleared))


def diagnose(ev: SoakEvidence, server: ServerView | None = None) -> list[Finding]:
    """The findings of :func:`diagnosis`, most likely first."""
    return list(diagnosis(ev, server).findings)
