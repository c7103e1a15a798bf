"""Localization: evidence in, findings out (pure rules; wording lives in ``report.soak.soak``).

The evidence and its numbered facts are :mod:`servelab.core.soak.observe` (re-exported here);
:func:`diagnose` applies one rule per layer and returns :class:`Finding` s, most likely first. A
finding names the observations that support it and those that contradict it, and the worker when
one is singled out. When the replay matrix (:mod:`servelab.core.soak.replay`) located the failure,
its layer's finding carries the matrix cells (the first hop at which the same payload goes from
working to failing); a failure the matrix could not reproduce convicts no proxy. When failures
were seen and nothing is found, :func:`undecided` says why: the observations that conflict, the
sources that stayed unknown, and the probe that would tell them apart.

Confidence (a score in [0, 1], not a probability): each rule has a base; every supporting
observation beyond the ones its gate needs adds ``_SUPPORT_STEP``, every contradicting one removes
``_CONTRA_STEP``; the result is clipped to [0.05, 0.99]. No failure and no violation: no finding,
except the run telemetry's ``client`` rule (the client did not receive what the decodes counted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from servelab.core.soak.observe import (
    CorrectnessIssue,
    EngineActivity,
    Evidence,
    Observation,
    Probe,
    Replay,
    Stall,
    observations,
    parse_metrics,
    parse_worker_list,
    parse_workers,
)
from servelab.core.soak.replay import REASON_NO_PAIR_REPLAY, REASON_NOT_REPRODUCED
from servelab.core.telemetry.rules import (
    FIRED,
    ServerView,
    TelemetryEvidence,
    assess,
    telemetry_observations,
)
from servelab.core.verify.coldstart import Start

__all__ = [
    "LAYERS",
    "PROBE_LOCALIZE",
    "PROBE_PAIR_REPLAY",
    "PROBE_REPLAY_UNDER_LOAD",
    "PROBE_SCRAPE",
    "PROBE_SOAK_WARM",
    "UNDECIDED_COLD",
    "UNDECIDED_CONFLICT",
    "UNDECIDED_NOT_LOCALIZED",
    "UNDECIDED_NOT_REPRODUCED",
    "UNDECIDED_NO_PAIR",
    "CorrectnessIssue",
    "EngineActivity",
    "Evidence",
    "Finding",
    "Observation",
    "Probe",
    "Replay",
    "ServerView",
    "Stall",
    "Undecided",
    "diagnose",
    "observations",
    "parse_metrics",
    "parse_worker_list",
    "parse_workers",
    "undecided",
]

LAYERS = (
    "client_proxy", "router", "prefill", "decode_transfer", "engine_wedge", "correctness",
    "engine_saturation", "client",
)  # fmt: skip
#: the layers router-counted worker errors (``points_at == "workers"``) support
_ENGINE_LAYERS = ("prefill", "decode_transfer", "engine_wedge")
#: the layers server-side evidence of a fault contradicts (it is not only the client side)
_CLIENT_SIDE = ("client_proxy",)
_TELEMETRY_BASE = 0.5

_SUPPORT_STEP = 0.05
_CONTRA_STEP = 0.2
_MATRIX_BASE = 0.75

UNDECIDED_NOT_REPRODUCED = "not_reproduced"  # every replay answered the failing payload
UNDECIDED_COLD = "cold_start"  # ... and the engines were cold when the soak began
UNDECIDED_NOT_LOCALIZED = "not_localized"  # no matrix was run (--no-localize, budget, deadline)
UNDECIDED_NO_PAIR = "no_pair_replay"  # the router fails, no pair could be replayed directly
UNDECIDED_CONFLICT = "conflict"  # evidence points different ways, no rule's gate holds

PROBE_REPLAY_UNDER_LOAD = "replay_under_load"  # soak longer / with more sessions, then replay
PROBE_SOAK_WARM = "soak_again_warm"  # soak again now that the engines are warm
PROBE_LOCALIZE = "localize"  # soak again with localization on and time for it
PROBE_PAIR_REPLAY = "pair_replay"  # give the prefills' bootstrap ports so pairs can be replayed
PROBE_SCRAPE = "scrape_unknown"  # make the unknown sources answer (metrics port, /metrics)


@dataclass(frozen=True, slots=True)
class Finding:
    """A suspected layer with its confidence, the observations for and against it, and the
    worker (service name or URL) when one is singled out."""

    layer: str
    confidence: float
    supporting: tuple[str, ...]
    contradicting: tuple[str, ...]
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class Undecided:
    """Why failures gave no finding: a reason code, the observations that conflict, the sources
    that stayed unknown, and the probe (code) that would tell them apart."""

    reason: str
    conflicting: tuple[str, ...]
    unknown: tuple[str, ...]
    probe: str


# ------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class _View:
    """Lookups the rules share."""

    ev: Evidence
    obs: dict[str, Observation]

    def replay(self, path: str) -> str | None:
        found = self.obs.get(f"replay.{path}")
        return None if found is None else str(found.data["outcome"])

    def ids(self, prefix: str, healthy: bool | None) -> list[str]:
        return [o.id for o in self.obs.values() if o.id.startswith(prefix) and o.healthy is healthy]

    def worker_health(self, role: str, healthy: bool) -> list[str]:
        return [
            f"probe.{p.service}.health"
            for p in self.ev.probes
            if p.kind == "health" and p.role == role and p.ok is healthy
        ]

    def engines(self, role: str) -> list[EngineActivity]:
        return [e for e in self.known if e.role == role]

    @property
    def known(self) -> list[EngineActivity]:
        """Engines whose /metrics answered both scrapes (the others are unknown)."""
        return [e for e in self.ev.engines if e.known]

    def progress_id(self, engine: EngineActivity) -> str:
        return f"metrics.{engine.service}.progress"


def _finding(
    layer: str, base: float, gate: list[str], extra: list[str], contra: list[str]
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
    if not v.ev.stalls or v.replay("fresh_entry") != "ok" or _cold_first_requests(v):
        return None
    gate = ["stalls", "replay.fresh_entry"]
    extra = []
    contra = []
    if "stalls.reused_connection" in v.obs:
        extra.append("stalls.reused_connection")
    if "stalls.fresh_connection" in v.obs:
        contra.append("stalls.fresh_connection")
    router = v.replay("direct_router")
    if router == "ok":
        extra.append("replay.direct_router")
    elif router is not None:
        contra.append("replay.direct_router")
    extra += v.ids("probe.", True) + v.ids("metrics.", True)
    contra += v.ids("probe.", False) + v.ids("metrics.", False)
    base = 0.6 if v.ev.via_proxy else 0.35
    return _finding("client_proxy", base, gate, extra, contra)


def _through_router_failed(v: _View) -> list[str]:
    """Ids showing the router path itself fails (direct replay, or the e2e probe)."""
    ids = ["replay.direct_router"] if v.replay("direct_router") in ("stalled", "error") else []
    ids += [f"probe.{p.service}.e2e" for p in v.ev.probes if p.kind == "e2e" and not p.ok]
    if not v.ev.via_proxy and v.replay("fresh_entry") in ("stalled", "error"):
        ids.append("replay.fresh_entry")
    return ids


def _rule_router(v: _View) -> Finding | None:
    failed = _through_router_failed(v)
    if not failed:
        return None
    readiness = v.ids("probe.", False)
    router_probes = [i for i in readiness if i.endswith((".readiness", ".workers"))]
    nothing_arrived = bool(v.known) and not any(e.received for e in v.known)
    engines_idle = [v.progress_id(e) for e in v.known if not e.busy and not e.received]
    if not router_probes and not nothing_arrived:
        return None
    gate = failed + router_probes + (engines_idle if nothing_arrived else [])
    extra = _all_health(v, True)
    contra = _all_health(v, False) + [v.progress_id(e) for e in v.known if e.received]
    return _finding("router", 0.5, gate, extra, contra)


def _rule_prefill(v: _View) -> Finding | None:
    sick = v.worker_health("prefill", False)
    if not sick or not (v.ev.stalls or _through_router_failed(v)):
        return None
    extra = _through_router_failed(v) + v.worker_health("decode", True)
    contra = [v.progress_id(e) for e in v.engines("prefill") if e.generating]
    return _finding("prefill", 0.6, sick, extra, contra)


def _rule_decode_transfer(v: _View) -> Finding | None:
    failed = _through_router_failed(v)
    transfer = v.ids("metrics.", False)
    transfer = [i for i in transfer if i.endswith(".transfer_failed")]
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
    if "stalls.fresh_connection" in v.obs:
        extra.append("stalls.fresh_connection")
    contra = [
        i
        for i in ("replay.fresh_entry", "replay.direct_router")
        if v.replay(i.split(".", 1)[1]) == "ok"
    ]
    return _finding("decode_transfer", 0.6, gate, extra, contra)


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
    return _finding("engine_wedge", 0.45, gate, [], contra)


def _rule_correctness(v: _View) -> Finding | None:
    ids = v.ids("correctness.", False)
    if not ids:
        return None
    return _finding("correctness", 0.85, ids, ids[1:], [])


_RULES: tuple[Callable[[_View], Finding | None], ...] = (
    _rule_client_proxy,
    _rule_router,
    _rule_prefill,
    _rule_decode_transfer,
    _rule_engine_wedge,
    _rule_correctness,
)


def _only(services: list[str]) -> str | None:
    unique = list(dict.fromkeys(services))
    return unique[0] if len(unique) == 1 else None


def _worker(v: _View, f: Finding) -> str | None:
    """The one worker a legacy finding points at (None: not one)."""
    if f.layer == "prefill":
        return _only([p.service for p in v.ev.probes if p.role == "prefill" and not p.ok])
    if f.layer == "decode_transfer":
        ids = set(f.supporting)
        return _only(
            [
                e.service
                for e in v.engines("decode")
                if {v.progress_id(e), f"metrics.{e.service}.transfer_failed"} & ids
            ]
            + [p.service for p in v.ev.probes if p.role == "decode" and not p.ok]
        )
    if f.layer == "engine_wedge":
        return _only([e.service for e in v.known if e.frozen])
    return None


def _corroboration(v: _View, layer: str, worker: str | None) -> list[str]:
    """Observations outside the matrix that agree with the matrix's layer (and worker)."""
    mine = [o for o in v.obs.values() if o.healthy is False and (worker is None or o.subject in
            (worker, "entry", "router"))]  # fmt: skip
    if layer == "decode_transfer":
        keys: tuple[str, ...] = (".transfer_failed", "failure.kv_transfer", ".progress", ".health")
    elif layer == "prefill":
        keys = (".health", ".progress")
    elif layer == "router":
        keys = ("router_metrics", ".readiness", ".workers", ".e2e")
    else:
        keys = ("stalls.reused_connection", "replay.direct_router")
    found = [o.id for o in mine if any(k in o.id for k in keys)]
    if layer == "client_proxy":
        found += v.ids("replay.direct_router", True)
    return found


def _matrix_finding(v: _View) -> Finding | None:
    matrix = v.ev.matrix
    if matrix is None or matrix.layer is None:
        return None
    loc = matrix.located
    gate = [*loc.failing, *loc.working]
    extra = _corroboration(v, loc.layer or "", loc.worker)
    if matrix.bisection is not None:
        extra.append("matrix.bisect")
    f = _finding(loc.layer or "", _MATRIX_BASE, gate, extra, [])
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
    if e.points_at == "workers":
        return f.layer in _ENGINE_LAYERS
    return e.points_at == f.layer or (e.points_at == "client" and f.layer in _CLIENT_SIDE)


def _contradicts(e: TelemetryEvidence, f: Finding) -> bool:
    """Server-side evidence of a fault contradicts a finding that blames only the client side."""
    return e.state == FIRED and e.points_at != "client" and f.layer in _CLIENT_SIDE


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


def _telemetry_findings(
    found: list[Finding], evidence: tuple[TelemetryEvidence, ...], failed: bool
) -> list[Finding]:
    """A finding of its own for a fired rule whose layer no other rule found: the client rule
    always (the client did not see what the servers produced), the others when requests failed."""
    out: list[Finding] = []
    for layer in dict.fromkeys(e.points_at for e in evidence if e.state == FIRED):
        if layer not in LAYERS or any(f.layer == layer for f in [*found, *out]):
            continue
        if layer != "client" and not failed:
            continue
        ids = [e.id for e in evidence if e.state == FIRED and e.points_at == layer]
        workers = {e.worker for e in evidence if e.id in ids}
        f = _finding(layer, _TELEMETRY_BASE, ids[:1], ids[1:], [])
        out.append(replace(f, worker=next(iter(workers)) if len(workers) == 1 else None))
    return out


def diagnose(ev: Evidence, server: ServerView | None = None) -> list[Finding]:
    """Apply every rule; findings sorted by confidence (then by the order of :data:`LAYERS`).
    ``server``: the run's telemetry (:mod:`servelab.core.telemetry.rules`) supports or
    contradicts the findings, and gives findings of its own."""
    evidence = assess(server)
    obs = [*observations(ev), *telemetry_observations(evidence)]
    view = _View(ev, {o.id: o for o in obs})
    found = [f for f in (rule(view) for rule in _RULES) if f is not None]
    found = [replace(f, worker=_worker(view, f)) for f in found]
    if ev.matrix is not None and ev.matrix.layer is None:
        # The same payload worked on a fresh connection and everywhere else: nothing reproduced,
        # so no connection layer is convicted on the fresh replay alone.
        reused = "stalls.reused_connection" in view.obs
        found = [f for f in found if f.layer != "client_proxy" or reused]
    located = _matrix_finding(view)
    if located is not None:
        found = _merge(found, located)
    failed = bool(ev.failures or ev.stalls or ev.issues)
    found += _telemetry_findings(found, evidence, failed)
    found = [_with_telemetry(f, evidence) for f in found]
    return sorted(found, key=lambda f: (-f.confidence, LAYERS.index(f.layer)))


def _failed_ids(v: _View) -> list[str]:
    return [o.id for o in v.obs.values() if o.id.startswith(("failure.", "stalls"))]


def undecided(
    ev: Evidence, findings: list[Finding], server: ServerView | None = None
) -> Undecided | None:
    """Why failures gave no finding (None: there is a finding, or nothing failed); the unknown
    sources include the run telemetry's (``server``)."""
    if findings or not (ev.failures or ev.stalls):
        return None
    v = _View(ev, {o.id: o for o in observations(ev)})
    failed = _failed_ids(v)
    unknown = tuple(o.id for o in v.obs.values() if o.data.get("unknown"))
    unknown += tuple(o.id for o in telemetry_observations(assess(server)) if o.healthy is None)
    if ev.matrix is None:
        return Undecided(UNDECIDED_NOT_LOCALIZED, tuple(failed), unknown, PROBE_LOCALIZE)
    worked = [c.id for c in ev.matrix.cells if c.ok]
    reason = ev.matrix.located.reason
    if reason == REASON_NOT_REPRODUCED:
        cold = ev.start is not None and ev.start.start == Start.COLD
        code, probe = (
            (UNDECIDED_COLD, PROBE_SOAK_WARM)
            if cold
            else (UNDECIDED_NOT_REPRODUCED, PROBE_REPLAY_UNDER_LOAD)
        )
        return Undecided(code, tuple(failed + worked), unknown, probe)
    if reason == REASON_NO_PAIR_REPLAY:
        return Undecided(
            UNDECIDED_NO_PAIR, tuple(failed + list(ev.matrix.located.failing)), unknown,
            PROBE_PAIR_REPLAY,
        )  # fmt: skip
    sick = v.ids("", False)
    probe = PROBE_SCRAPE if unknown else PROBE_REPLAY_UNDER_LOAD
    return Undecided(UNDECIDED_CONFLICT, tuple(sick + worked), unknown, probe)
