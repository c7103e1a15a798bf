"""The per-layer rules of a soak's localization (pure): each reads the evidence's numbered facts
through one :class:`View` and returns a :class:`~servelab.core.soak.finding.Finding` for its
layer, or None. :data:`RULES` lists them (the client-side proxy, answers from in front of the
router, the router, the prefill, the decode and its KV transfer, a wedged engine, correctness, the
P/D pair); :func:`singled_out` names the one worker a finding points at.
:mod:`servelab.core.soak.diagnose` applies them and joins their findings with the replay matrix,
the run telemetry and the conviction rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from servelab.core.soak.evidence import EngineActivity, ProbeKind, ReplayPath, SoakEvidence
from servelab.core.soak.finding import Finding, finding
from servelab.core.soak.observation import (
    CorrectnessViolations,
    EngineProgress,
    FreshConnectionStalls,
    FrontAnswers,
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
from servelab.core.telemetry.layers import Layer
from servelab.core.verify.coldstart import Start

__all__ = ["RULES", "View", "singled_out"]

T = TypeVar("T")


@dataclass(frozen=True)
class View:
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


def _all_health(v: View, healthy: bool) -> list[str]:
    return [*v.worker_health("prefill", healthy), *v.worker_health("decode", healthy)]


def _cold_first_requests(v: View) -> bool:
    """The engines were cold and every stall was a connection's first request."""
    start = v.ev.start
    cold = start is not None and start.start == Start.COLD
    return cold and all(s.connection_requests == 0 for s in v.ev.stalls)


def _rule_client_proxy(v: View) -> Finding | None:
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
    return finding(Layer.CLIENT_PROXY, base, gate, extra, contra)


def _rule_front_answers(v: View) -> Finding | None:
    """Failed answers that came from in front of the router place the failure there alone."""
    front = v.of(FrontAnswers)
    if not front:
        return None
    gate = [front[0].id]
    extra = [o.id for o in v.of(Resends)]
    router = v.replay(ReplayPath.DIRECT_ROUTER)
    if router is not None and router.healthy:
        extra.append(router.id)
    return finding(Layer.CLIENT_PROXY, 0.6, gate, extra, [])


def _through_router_failed(v: View) -> list[str]:
    """Ids showing the router path itself fails (direct replay, or the e2e probe)."""
    direct, fresh = v.replay(ReplayPath.DIRECT_ROUTER), v.replay(ReplayPath.FRESH_ENTRY)
    ids = [direct.id] if direct is not None and not direct.healthy else []
    ids += v.probes(ProbeKind.E2E, healthy=False)
    if not v.ev.via_proxy and fresh is not None and not fresh.healthy:
        ids.append(fresh.id)
    return ids


def _rule_router(v: View) -> Finding | None:
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
    return finding(Layer.ROUTER, 0.5, gate, extra, contra)


def _rule_prefill(v: View) -> Finding | None:
    sick = v.worker_health("prefill", False)
    if not sick or not (v.ev.stalls or _through_router_failed(v)):
        return None
    extra = _through_router_failed(v) + v.worker_health("decode", True)
    contra = [v.progress_id(e) for e in v.engines("prefill") if e.generating]
    return finding(Layer.PREFILL, 0.6, sick, extra, contra)


def _rule_decode_transfer(v: View) -> Finding | None:
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
    return finding(Layer.DECODE_TRANSFER, 0.6, gate, extra, contra)


def _rule_engine_wedge(v: View) -> Finding | None:
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
    return finding(Layer.ENGINE_WEDGE, 0.45, gate, [], contra)


def _rule_pd_pair(v: View) -> Finding | None:
    """A prefill and decode that disagree on what the KV hand-off carries explain failed
    requests through the router (a hang or an error) better than any layer's symptom."""
    mismatched = [o.id for o in v.of(PairMismatch)]
    failed = _through_router_failed(v) + [o.id for o in v.of(SignatureFailures)]
    if not mismatched or not (failed or v.ev.stalls or v.ev.failures):
        return None
    extra = [o.id for o in v.of(TransferFailures) if o.healthy is False] + _all_health(v, True)
    return finding(Layer.PD_PAIR, 0.9, mismatched, extra + failed, [])


def _rule_correctness(v: View) -> Finding | None:
    ids = [o.id for o in v.of(CorrectnessViolations) if o.healthy is False]
    if not ids:
        return None
    at_kv = any(o.issue == "answer_kv_transfer" for o in v.of(CorrectnessViolations))
    layer = Layer.DECODE_TRANSFER if at_kv else Layer.CORRECTNESS  # answers wrong from the KV
    return finding(layer, 0.85, ids, ids[1:], [])


RULES: tuple[Callable[[View], Finding | None], ...] = (
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


def singled_out(v: View, f: Finding) -> str | None:
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
