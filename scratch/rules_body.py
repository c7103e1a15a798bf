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
        return [e for e in self.ev.engines if e.role == role]

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


def _rule_client_proxy(v: _View) -> Finding | None:
    if not v.ev.stalls or v.replay("fresh_entry") != "ok":
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
    nothing_arrived = bool(v.ev.engines) and not any(e.received for e in v.ev.engines)
    engines_idle = [v.progress_id(e) for e in v.ev.engines if not e.busy and not e.received]
    if not router_probes and not nothing_arrived:
        return None
    gate = failed + router_probes + (engines_idle if nothing_arrived else [])
    extra = _all_health(v, True)
    contra = _all_health(v, False) + [v.progress_id(e) for e in v.ev.engines if e.received]
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
    frozen = [e for e in v.ev.engines if e.frozen]
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


def diagnose(ev: Evidence) -> list[Finding]:
    """Apply every rule; findings sorted by confidence (then by the order of :data:`LAYERS`)."""
    view = _View(ev, {o.id: o for o in observations(ev)})
    found = [f for f in (rule(view) for rule in _RULES) if f is not None]
    return sorted(found, key=lambda f: (-f.confidence, LAYERS.index(f.layer)))
