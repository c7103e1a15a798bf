"""Localization: evidence in, findings out (pure; wording lives in ``report.soak``).

The evidence is :mod:`servelab.core.soak.evidence`, its numbered facts
:mod:`servelab.core.soak.observation` (read by :mod:`servelab.core.soak.observe`);
:func:`diagnose` applies one rule per layer (:mod:`servelab.core.soak.layerrules`) and returns
:class:`~servelab.core.soak.finding.Finding` s, most likely first. The rules select facts by their
type and fields; a finding names the observations that support it and those that contradict it by
their ids, and the worker when one is singled out; every finding then meets the conviction rule
(:mod:`servelab.core.soak.conviction`), which keeps the layers it clears apart. When the
replay matrix (:mod:`servelab.core.soak.replay`) located the failure, its layer's finding
carries the matrix cells (the first hop at which the same payload goes from working to
failing); a failure the matrix could not reproduce convicts no proxy. When failures were seen
and nothing is found, :func:`servelab.core.soak.undecided.undecided` says
why: the observations that conflict, the sources that stayed unknown, and the probe that would
tell them apart. A finding whose observations a stronger finding further
out explains (the same payload worked at the hops inside the located one, or the failed answers
came from in front of the router) is dropped, and
:class:`~servelab.core.soak.finding.Dropped` says by which and why.

Confidence is scored as :mod:`servelab.core.soak.finding` says; the run telemetry's evidence
moves it by the same steps. No failure and no violation: no finding, except the run telemetry's
``client`` rule (the client did not receive what the decodes counted).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from servelab.core.soak.conviction import (
    LAYER_DEPTH,
    Exoneration,
    at_layer,
    corroborates,
    exoneration,
)
from servelab.core.soak.creep import creep_evidence, crept
from servelab.core.soak.evidence import ReplayPath, SoakEvidence
from servelab.core.soak.finding import (
    CONTRA_STEP,
    SUPPORT_STEP,
    Dropped,
    DropReason,
    Finding,
    finding,
)
from servelab.core.soak.layerrules import RULES, View, singled_out
from servelab.core.soak.observation import (
    FrontAnswers,
    MatrixBisection,
    ReusedConnectionStalls,
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

__all__ = ["Diagnosis", "diagnose", "diagnosis"]

#: the layers router-counted worker errors (``points_at == WORKERS``) support
_ENGINE_LAYERS = (Layer.PREFILL, Layer.DECODE_TRANSFER, Layer.ENGINE_WEDGE)
#: the layers server-side evidence of a fault contradicts (it is not only the client side)
_CLIENT_SIDE = (Layer.CLIENT_PROXY,)
_ORDER = tuple(Layer)
_TELEMETRY_BASE = 0.5

_MATRIX_BASE = 0.75


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The findings (most likely first), those dropped as explained by a stronger one, and the
    layers the conviction rule cleared (:mod:`servelab.core.soak.conviction`)."""

    findings: tuple[Finding, ...]
    dropped: tuple[Dropped, ...] = ()
    exonerated: tuple[Exoneration, ...] = ()


def _corroboration(v: View, layer: Layer, worker: str | None) -> list[str]:
    """Observations outside the matrix that agree with the matrix's layer (and worker)."""
    mine = [o for o in v.obs.values() if o.healthy is False and (worker is None or o.subject in
            (worker, "entry", "router"))]  # fmt: skip
    found = [o.id for o in mine if corroborates(o, layer)]
    direct = v.replay(ReplayPath.DIRECT_ROUTER)
    if layer == Layer.CLIENT_PROXY and direct is not None and direct.healthy:
        found.append(direct.id)
    return found


def _matrixfinding(v: View) -> Finding | None:
    matrix = v.ev.matrix
    if matrix is None or matrix.located.layer is None:
        return None
    loc, cells = matrix.located, v.cell_ids()
    gate = [cells.get(i, i) for i in (*loc.failing, *loc.working)]
    extra = _corroboration(v, matrix.located.layer, loc.worker)
    extra += [o.id for o in v.of(MatrixBisection)]
    contra = [cells.get(i, i) for i in loc.conflicting]
    f = finding(matrix.located.layer, _MATRIX_BASE, gate, extra, contra)
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
    score = f.confidence + SUPPORT_STEP * len(support) - CONTRA_STEP * len(against)
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
        f = finding(layer, _TELEMETRY_BASE, ids[:1], ids[1:], [])
        out.append(replace(f, worker=next(iter(workers)) if len(workers) == 1 else None))
    return out


def _explanation(v: View, found: list[Finding]) -> tuple[Finding, DropReason, list[str]] | None:
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


def _drop_explained(v: View, found: list[Finding]) -> tuple[list[Finding], list[Dropped]]:
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
    v: View, found: list[Finding], evidence: tuple[TelemetryEvidence, ...]
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
    view = View(ev, {o.id: o for o in obs})
    found = [f for f in (rule(view) for rule in RULES) if f is not None]
    found = [replace(f, worker=singled_out(view, f)) for f in found]
    if ev.matrix is not None and ev.matrix.located.layer is None:
        # The same payload worked on a fresh connection and everywhere else: nothing reproduced,
        # so no connection layer is convicted on the fresh replay alone.
        own = bool(view.of(ReusedConnectionStalls) or view.of(FrontAnswers))
        found = [f for f in found if f.layer != Layer.CLIENT_PROXY or own]
    located = _matrixfinding(view)
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
