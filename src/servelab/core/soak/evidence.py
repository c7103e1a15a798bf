"""What a soak's localization gathers, as data (pure; the facts read from it are
:mod:`servelab.core.soak.observe`, the rules :mod:`servelab.core.soak.diagnose`).

The soak gathers one :class:`SoakEvidence` per localization: the failures and stalls of its
signature, the replay matrix (:mod:`servelab.core.soak.replay`), the router's readiness, worker
list and own metrics, every worker's health, two scrapes of each engine's ``/metrics`` around the
replays, the loads, whether the engines were cold, and the correctness violations seen. A source
that did not answer is kept as unknown (an empty scrape, ``known=False``, a load of None), never
as healthy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.soak.replay import Hop, Matrix
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.telemetry.router import RouterMetrics, WorkerLoad
from servelab.core.verify.coldstart import StartClass
from servelab.core.verify.pair import PairReport

__all__ = [
    "DIAGNOSED_METRICS",
    "GENERATED",
    "PROMPT",
    "QUEUED",
    "REQUESTS",
    "RUNNING",
    "TRANSFER_FAILED",
    "TRANSFER_QUEUES",
    "CorrectnessIssue",
    "EngineActivity",
    "Localization",
    "MaskedResend",
    "Probe",
    "ProbeKind",
    "Replay",
    "ReplayPath",
    "SoakEvidence",
    "Stall",
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
#: The engine metrics the diagnosis reads (SGLang's names): a scrape keeps these, no more.
DIAGNOSED_METRICS = (
    RUNNING,
    QUEUED,
    GENERATED,
    PROMPT,
    REQUESTS,
    TRANSFER_FAILED,
    *TRANSFER_QUEUES,
)


class ReplayPath(StrEnum):
    """The stalled payload sent again: on a fresh connection through the entry point, or
    straight to the router."""

    FRESH_ENTRY = "fresh_entry"
    DIRECT_ROUTER = "direct_router"


class ProbeKind(StrEnum):
    """What an HTTP look at a service asked: a worker's ``/health``, the router's
    ``/readiness`` or ``GET /workers``, or a minimal request through it (``e2e``)."""

    HEALTH = "health"
    READINESS = "readiness"
    WORKERS = "workers"
    E2E = "e2e"


@dataclass(frozen=True, slots=True)
class Stall:
    """A request that stalled (:func:`~servelab.core.soak.signatures.stall`): where, what it
    carried, what it received; ``reason`` is its record's failure reason."""

    session: int
    round: int
    payload_bytes: int
    connection_age_s: float
    connection_requests: int  # requests the connection carried before this one
    received_bytes: int
    received_events: int
    phase: Phase
    reason: str


@dataclass(frozen=True, slots=True)
class MaskedResend:
    """A soak request its client sent again (the agent saw success; a plain client would have
    failed): session and round, how long the connection had sat idle, whether the server had
    closed the kept-alive connection before the send (else before any byte of the answer, so the
    request went out twice), the hop the connection went to (the entry point, reused), and
    ``status`` when a retrying client (the OpenAI SDK) sent it again after an answer with that
    HTTP status instead."""

    session: int
    round: int
    idle_s: float
    before_send: bool
    hop: Hop = Hop.REUSED
    status: int | None = None


@dataclass(frozen=True, slots=True)
class Replay:
    """The stalled payload sent again along ``path``, and how it ended."""

    path: ReplayPath
    outcome: Outcome
    status: int | None = None
    elapsed_s: float = 0.0
    received_bytes: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Probe:
    """One HTTP look at a service (``role``: prefill, decode or router)."""

    service: str
    role: str
    kind: ProbeKind
    ok: bool
    status: int | None = None
    elapsed_s: float = 0.0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class EngineActivity:
    """Two scrapes of an engine's ``/metrics`` (summed over label sets, :data:`DIAGNOSED_METRICS`
    only), ``interval_s`` apart."""

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
    #: The prefill/decode pairs whose engines disagree on what the KV hand-off carries (the pair
    #: layer of verify, read from what the workers report while the failure was localized).
    pairs: tuple[PairReport, ...] = ()

    @property
    def signature(self) -> Signature:
        return self.failure.signature


@dataclass(frozen=True)
class SoakEvidence:
    """Everything one localization saw; ``via_proxy`` when the entry point is not the router
    itself. ``scope``: the signature of a localization after the soak's first one: its
    observations' ids then read ``<scope>:<id>`` (``http_5xx:probe.router.readiness``), so each
    finding points at its own evidence. ``resends``: the requests the client masked."""

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
    scope: Signature | None = None
    resends: tuple[MaskedResend, ...] = ()
    #: the router's answers through the entry point carried the request's ``x-request-id`` back
    #: (so an answer without it came from a hop in front of the router)
    router_echoes: bool = False
    #: the mismatched prefill/decode pairs the localization found (:class:`Localization`)
    pairs: tuple[PairReport, ...] = ()


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
        if not math.isfinite(value):  # NaN or ±Inf: not reported
            continue
        name = name_part.strip()
        values[name] = values.get(name, 0.0) + value
    return {name: v for name, v in values.items() if math.isfinite(v)}  # overflowed: not reported


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
