"""Localization evidence and the numbered facts read from it (pure; rules in
``core.soak.diagnose``).

The soak gathers :class:`Evidence` for each distinct failure signature: the failures, the replay
matrix (:mod:`servelab.core.soak.replay`), the router's readiness, worker list and own metrics,
every worker's health, two scrapes of each engine's ``/metrics`` around the replays, the loads,
whether the engines were cold, and the correctness violations seen. :func:`observations` turns that
into numbered facts, each judged healthy (True), unhealthy (False) or neither (None: neutral, or
**unknown** — a source that did not answer is never counted healthy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servelab.core.soak.replay import Matrix
from servelab.core.soak.signatures import Failure
from servelab.core.telemetry.router import RouterMetrics, WorkerLoad
from servelab.core.verify.coldstart import Start, StartClass

__all__ = [
    "CorrectnessIssue",
    "EngineActivity",
    "Evidence",
    "Localization",
    "Observation",
    "Probe",
    "Replay",
    "Stall",
    "observations",
    "parse_metrics",
    "parse_worker_list",
    "parse_workers",
]

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
    def known(self) -> bool:
        """Both scrapes answered (else the engine's progress is unknown, not healthy)."""
        return bool(self.before) and bool(self.after)

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
class Localization:
    """One localization: the failure that started it (its signature), the replay matrix, the
    probes, the engines' activity, the router's own metrics and the loads, and its wall time."""

    failure: Failure
    matrix: Matrix
    probes: tuple[Probe, ...] = ()
    engines: tuple[EngineActivity, ...] = ()
    router_metrics: RouterMetrics | None = None
    loads: tuple[WorkerLoad, ...] = ()
    elapsed_s: float = 0.0

    @property
    def signature(self) -> str:
        return self.failure.signature


@dataclass(frozen=True)
class Evidence:
    """Everything the soak saw; ``via_proxy`` when the entry point is not the router itself."""

    via_proxy: bool
    stalls: tuple[Stall, ...] = ()
    replays: tuple[Replay, ...] = ()
    probes: tuple[Probe, ...] = ()
    engines: tuple[EngineActivity, ...] = ()
    issues: tuple[CorrectnessIssue, ...] = ()
    failures: tuple[Failure, ...] = ()
    matrix: Matrix | None = None
    router_metrics: RouterMetrics | None = None
    loads: tuple[WorkerLoad, ...] = ()
    start: StartClass | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """A numbered fact: ``healthy`` is True, False, or None (neutral / not measured)."""

    id: str
    subject: str
    healthy: bool | None
    data: Mapping[str, Any] = field(default_factory=dict)


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
    return [(role, url) for role, url, _ in parse_worker_list(body)]


def parse_worker_list(body: str) -> list[tuple[str, str, int | None]]:
    """A router's ``GET /workers`` JSON → [(role, url, bootstrap port or None)]."""
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
        port = item.get("bootstrap_port")
        boot = port if isinstance(port, int) and not isinstance(port, bool) else None
        found.append((role or "worker", item["url"].rstrip("/"), boot))
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
        if not e.known:
            unknown = {"role": e.role, "unknown": True}
            obs.append(Observation(f"metrics.{e.service}.progress", e.service, None, unknown))
            continue
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


def _failure_observations(ev: Evidence) -> list[Observation]:
    by_sig: dict[str, list[Failure]] = {}
    for f in ev.failures:
        by_sig.setdefault(f.signature, []).append(f)
    obs = []
    for sig, found in by_sig.items():
        first = found[0]
        data = {
            "count": len(found),
            "session": first.session,
            "round": first.round,
            "status": first.status,
            "error": first.error,
            "detail": first.detail[:200],
            "payload_bytes": first.payload_bytes,
            "connection_requests": sorted({f.connection_requests for f in found}),
        }
        obs.append(Observation(f"failure.{sig}", "entry", False, data))
    return obs


def _matrix_observations(ev: Evidence) -> list[Observation]:
    if ev.matrix is None:
        return []
    obs = []
    bisect = () if ev.matrix.bisection is None else ev.matrix.bisection.steps
    for c in (*ev.matrix.cells, *bisect):
        data = {
            "hop": c.hop,
            "target": c.target,
            "payload": c.payload,
            "stream": c.stream,
            "payload_bytes": c.payload_bytes,
            "outcome": c.outcome,
            "status": c.status,
            "elapsed_s": round(c.elapsed_s, 3),
            "first_byte_s": None if c.first_byte_s is None else round(c.first_byte_s, 3),
            "received_bytes": c.received_bytes,
            "side": c.side,
            "detail": c.detail[:200],
        }
        obs.append(Observation(c.id, c.target, c.ok, data))
    b = ev.matrix.bisection
    if b is not None:
        data = {
            "hop": b.hop,
            "target": b.target,
            "ok_bytes": b.ok_bytes,
            "fail_bytes": b.fail_bytes,
        }
        obs.append(Observation("matrix.bisect", b.target, None, data))
    return obs


def _router_metric_observations(ev: Evidence) -> list[Observation]:
    m = ev.router_metrics
    if m is None:
        return []
    if not m.known:
        return [Observation("router_metrics", "router", None, {"unknown": True})]
    obs = [
        Observation(
            "router_metrics",
            "router",
            not (m.open_circuits or m.unhealthy),
            {"inflight_aged": m.inflight, "errors": dict(m.errors)},
        )
    ]
    obs += [
        Observation(f"router_metrics.cb_open.{w}", w, False, {"worker": w, "state": m.cb_state[w]})
        for w in m.open_circuits
    ]
    obs += [
        Observation(f"router_metrics.unhealthy.{w}", w, False, {"worker": w}) for w in m.unhealthy
    ]
    return obs


def _context_observations(ev: Evidence) -> list[Observation]:
    obs = [
        Observation(
            f"load.{x.source}.{x.service}",
            x.service,
            None,
            {"source": x.source, "load": x.load, "unknown": x.load is None},
        )
        for x in ev.loads
    ]
    if ev.start is not None:
        s = ev.start
        data = {"start": s.start, "reason": s.reason, "served_before": s.served_before,
                "first_s": s.first_s, "second_s": s.second_s}  # fmt: skip
        obs.append(
            Observation("engines.start", "engines", None if s.start == Start.COLD else True, data)
        )
    return obs


def observations(ev: Evidence) -> list[Observation]:
    """Every fact of ``ev``, with a stable id (``replay.fresh_entry``, ``probe.decode.health``…)."""
    return [
        *_stall_observations(ev),
        *_failure_observations(ev),
        *_matrix_observations(ev),
        *_replay_observations(ev),
        *_probe_observations(ev),
        *_engine_observations(ev),
        *_router_metric_observations(ev),
        *_context_observations(ev),
        *_issue_observations(ev),
    ]
