"""Hang localization: evidence in, findings out (pure rules; wording lives in ``report.soak``).

The soak gathers :class:`Evidence` at the first stalls: the stalled requests, replays of the same
payload on a fresh connection through the entry point and directly to the router, the router's
readiness and worker list, every worker's health, two scrapes of each engine's ``/metrics`` around
the replays (are its counters moving?), an e2e probe through the router, and the correctness
violations seen. :func:`observations` turns that into numbered facts, each judged healthy or not;
:func:`diagnose` applies one rule per layer and returns :class:`Finding` s, most likely first.
A finding names the observations that support it and those that contradict it.

Confidence (a score in [0, 1], not a probability): each rule has a base; every supporting
observation beyond the ones its gate needs adds ``_SUPPORT_STEP``, every contradicting one removes
``_CONTRA_STEP``; the result is clipped to [0.05, 0.99]. No stall and no violation: no finding.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LAYERS",
    "CorrectnessIssue",
    "EngineActivity",
    "Evidence",
    "Finding",
    "Observation",
    "Probe",
    "Replay",
    "Stall",
    "diagnose",
    "observations",
    "parse_metrics",
    "parse_workers",
]

LAYERS = ("client_proxy", "router", "prefill", "decode_transfer", "engine_wedge", "correctness")

RUNNING = "sglang:num_running_reqs"
QUEUED = "sglang:num_queue_reqs"
GENERATED = "sglang:generation_tokens_total"
PROMPT = "sglang:prompt_tokens_total"
REQUESTS = "sglang:num_requests_total"
TRANSFER_FAILED = "sglang:num_transfer_failed_reqs_total"
#: Real SGLang decode queues before the running batch (absent from engines that lack them).
TRANSFER_QUEUES = ("sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs")

_SUPPORT_STEP = 0.05
_CONTRA_STEP = 0.2


@dataclass(frozen=True, slots=True)
class Stall:
    """A request that received no byte for the idle timeout (or hit the run deadline)."""

    session: int
    round: int
    payload_bytes: int
    connection_age_s: float
    connection_requests: int  # requests the connection carried before this one
    received_bytes: int
    received_events: int
    phase: str  # "head" (no response head yet) | "body" (stream started, then silence)
    reason: str


@dataclass(frozen=True, slots=True)
class Replay:
    """The stalled payload sent again: ``path`` is ``"fresh_entry"`` or ``"direct_router"``."""

    path: str
    outcome: str  # "ok" | "stalled" | "error"
    status: int | None = None
    elapsed_s: float = 0.0
    received_bytes: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Probe:
    """One HTTP look at a service: ``kind`` is health, readiness, workers or e2e."""

    service: str
    role: str
    kind: str
    ok: bool
    status: int | None = None
    elapsed_s: float = 0.0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class EngineActivity:
    """Two scrapes of an engine's ``/metrics`` (summed over label sets), ``interval_s`` apart."""

    service: str
    role: str
    before: Mapping[str, float]
    after: Mapping[str, float]
    interval_s: float

    def delta(self, name: str) -> float:
        """How much a counter moved between the scrapes (0 when either scrape lacks it)."""
        if name not in self.before or name not in self.after:
            return 0.0
        return self.after[name] - self.before[name]

    @property
    def busy(self) -> bool:
        """Requests running or queued at the second scrape."""
        return self.after.get(RUNNING, 0.0) + self.after.get(QUEUED, 0.0) > 0

    @property
    def generating(self) -> bool:
        return self.delta(GENERATED) > 0

    @property
    def received(self) -> bool:
        """New requests or prompt tokens arrived between the scrapes."""
        return self.delta(REQUESTS) > 0 or self.delta(PROMPT) > 0

    @property
    def in_transfer(self) -> float | None:
        """Requests waiting for their KV at the second scrape; None when not exported."""
        found = [self.after[n] for n in TRANSFER_QUEUES if n in self.after]
        return sum(found) if found else None

    @property
    def frozen(self) -> bool:
        """Work in hand but no token produced between the scrapes."""
        return self.busy and not self.generating


@dataclass(frozen=True, slots=True)
class CorrectnessIssue:
    """A violation: ``kind`` is ``"tool_call_json"`` or ``"nondeterministic"``."""

    kind: str
    session: int
    round: int
    detail: str


@dataclass(frozen=True)
class Evidence:
    """Everything the soak saw; ``via_proxy`` when the entry point is not the router itself."""

    via_proxy: bool
    stalls: tuple[Stall, ...] = ()
    replays: tuple[Replay, ...] = ()
    probes: tuple[Probe, ...] = ()
    engines: tuple[EngineActivity, ...] = ()
    issues: tuple[CorrectnessIssue, ...] = ()


@dataclass(frozen=True, slots=True)
class Observation:
    """A numbered fact: ``healthy`` is True, False, or None (neutral / not measured)."""

    id: str
    subject: str
    healthy: bool | None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finding:
    """A suspected layer with its confidence and the observations for and against it."""

    layer: str
    confidence: float
    supporting: tuple[str, ...]
    contradicting: tuple[str, ...]


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text exposition → {metric name: value summed over its label sets}."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name_part, _, rest = line.partition("{") if "{" in line else line.partition(" ")
        if "{" in line:
            rest = rest.rpartition("}")[2]
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue
        name = name_part.strip()
        values[name] = values.get(name, 0.0) + value
    return values


def parse_workers(body: str) -> list[tuple[str, str]]:
    """A router's ``GET /workers`` JSON → [(role, url)]; role is prefill, decode or the raw type."""
    try:
        data = json.loads(body)
    except ValueError:
        return []
    items = data.get("workers", data) if isinstance(data, dict) else data
    found = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        kind = str(item.get("worker_type") or item.get("type") or item.get("role") or "").lower()
        role = "prefill" if "prefill" in kind else "decode" if "decode" in kind else kind
        found.append((role or "worker", item["url"].rstrip("/")))
    return found


# ------------------------------------------------------------------------------- observations
def _stall_observations(ev: Evidence) -> list[Observation]:
    if not ev.stalls:
        return []
    reused = [s for s in ev.stalls if s.connection_requests > 0]
    fresh = [s for s in ev.stalls if s.connection_requests == 0]
    obs = [
        Observation(
            "stalls",
            "entry",
            False,
            {"count": len(ev.stalls), "head": sum(s.phase == "head" for s in ev.stalls)},
        )
    ]
    if reused:
        carried = sorted({s.connection_requests for s in reused})
        obs.append(
            Observation(
                "stalls.reused_connection",
                "entry",
                False,
                {"count": len(reused), "requests_carried": carried},
            )
        )
    if fresh:
        obs.append(Observation("stalls.fresh_connection", "entry", False, {"count": len(fresh)}))
    return obs


def _replay_observations(ev: Evidence) -> list[Observation]:
    return [
        Observation(
            f"replay.{r.path}",
            r.path,
            r.outcome == "ok",
            {
                "outcome": r.outcome,
                "status": r.status,
                "elapsed_s": round(r.elapsed_s, 3),
                "received_bytes": r.received_bytes,
                "detail": r.detail,
            },
        )
        for r in ev.replays
    ]


def _probe_observations(ev: Evidence) -> list[Observation]:
    return [
        Observation(
            f"probe.{p.service}.{p.kind}",
            p.service,
            p.ok,
            {
                "role": p.role,
                "kind": p.kind,
                "status": p.status,
                "elapsed_s": round(p.elapsed_s, 3),
                "detail": p.detail,
            },
        )
        for p in ev.probes
    ]


def _engine_observations(ev: Evidence) -> list[Observation]:
    obs = []
    for e in ev.engines:
        data = {
            "role": e.role,
            "running": e.after.get(RUNNING),
            "queued": e.after.get(QUEUED),
            "generated_delta": e.delta(GENERATED),
            "requests_delta": e.delta(REQUESTS),
            "prompt_tokens_delta": e.delta(PROMPT),
            "in_transfer": e.in_transfer,
            "interval_s": round(e.interval_s, 3),
        }
        obs.append(Observation(f"metrics.{e.service}.progress", e.service, not e.frozen, data))
        failed = e.delta(TRANSFER_FAILED)
        if failed > 0:
            obs.append(
                Observation(
                    f"metrics.{e.service}.transfer_failed",
                    e.service,
                    False,
                    {"role": e.role, "delta": failed},
                )
            )
    return obs


def _issue_observations(ev: Evidence) -> list[Observation]:
    obs = []
    for kind in ("tool_call_json", "nondeterministic"):
        found = [i for i in ev.issues if i.kind == kind]
        if found:
            examples = [
                {"session": i.session, "round": i.round, "detail": i.detail} for i in found[:3]
            ]
            obs.append(
                Observation(
                    f"correctness.{kind}",
                    "answers",
                    False,
                    {"count": len(found), "examples": examples},
                )
            )
    return obs


def observations(ev: Evidence) -> list[Observation]:
    """Every fact of ``ev``, with a stable id (``replay.fresh_entry``, ``probe.decode.health``…)."""
    return [
        *_stall_observations(ev),
        *_replay_observations(ev),
        *_probe_observations(ev),
        *_engine_observations(ev),
        *_issue_observations(ev),
    ]


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
