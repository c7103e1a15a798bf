"""The run's own telemetry as evidence: what the router and the engines counted over a run,
read by rules (pure; wording lives in ``report.soak``).

Each rule reads a :class:`~servelab.core.telemetry.summary.RunTelemetry` (and, for two of them, what
the client measured over the same window, :class:`ClientWindow`) and returns one
:class:`TelemetryEvidence` per source it looked at: ``fired`` (the rule's condition holds; the
:class:`~servelab.core.soak.layers.Layer` it points at, or :data:`WORKERS`), ``quiet`` (the
source answered and the condition does not hold) or ``unknown`` (the source did not answer, or
there is too little to judge; the reason says which) — never ``quiet`` for a source that did not
answer. Every piece of evidence cites the metric series
it read, with the source and the value (a counter's delta over the run, a gauge's rise). In a
soak's diagnosis each one is a numbered fact, a :class:`TelemetryReading`.

Rules and thresholds (the constants below):

- ``router_errors`` (router source): the router counted its workers failing
  (``smg_worker_errors_total``, ``smg_worker_retries_exhausted_total`` grew) → :data:`WORKERS`; or
  it refused requests itself with no worker error (``smg_http_responses_total`` with a 5xx status,
  a ``smg_worker_cb_transitions_total{to="open"}`` transition, a ``smg_worker_cb_state`` gauge
  ending open) → ``router``.
- ``engine_transfer`` (each decode): ``sglang:num_transfer_failed_reqs_total`` or
  ``vllm:nixl_num_failed_transfers_total`` grew → ``decode_transfer`` (that worker).
- ``engine_saturation`` (each engine): the waiting queue (``sglang:num_queue_reqs`` /
  ``vllm:num_requests_waiting``) rose by at least :data:`QUEUE_RISE` requests (mean of the late
  half of the samples minus mean of the early half) while the client's median TTFT rose by at
  least :data:`TTFT_RISE` x (late half against early half of the requests, by send time) →
  ``engine_saturation``: queueing in the engine, not a network fault.
- ``client_vs_server`` (the decodes together): the output tokens the client received and those
  the decodes counted (``sglang:generation_tokens_total`` / ``vllm:generation_tokens_total``) over
  the same window differ by more than :data:`CLIENT_TOLERANCE` (relative to the decodes' count),
  with at least :data:`MIN_TOKENS` counted → ``client``: the load generator (or what sits between
  it and the router), not the servers.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from servelab.core.load.records import RequestRecord
from servelab.core.soak.layers import Layer
from servelab.core.telemetry.summary import GENERATED_TOKENS, RunTelemetry, SourceTelemetry

__all__ = [
    "CLIENT_TOLERANCE",
    "FIRED",
    "MIN_TOKENS",
    "MIN_TTFTS",
    "QUEUE_GAUGES",
    "QUEUE_RISE",
    "QUIET",
    "RULE_CLIENT",
    "RULE_ROUTER",
    "RULE_SATURATION",
    "RULE_TRANSFER",
    "TRANSFER_FAILURES",
    "TTFT_RISE",
    "UNKNOWN",
    "WORKERS",
    "Cite",
    "ClientWindow",
    "PointsAt",
    "ServerView",
    "TelemetryEvidence",
    "TelemetryReading",
    "assess",
    "client_window",
    "run_evidence",
    "telemetry_observations",
]

RULE_ROUTER = "router_errors"
RULE_TRANSFER = "engine_transfer"
RULE_SATURATION = "engine_saturation"
RULE_CLIENT = "client_vs_server"

FIRED: Final = "fired"
QUIET: Final = "quiet"
UNKNOWN: Final = "unknown"
State = Literal["fired", "quiet", "unknown"]

#: What the router's counted worker errors point at: the engines (a prefill, the decode path, a
#: wedged engine), not one layer.
WORKERS: Final = "workers"
PointsAt = Layer | Literal["workers"]

#: client and decode token counts may differ by this fraction of the decodes' count
CLIENT_TOLERANCE = 0.25
#: fewer tokens counted by the decodes than this: too little to compare
MIN_TOKENS = 100
#: the waiting queue's rise (requests, late-half mean minus early-half mean) that counts
QUEUE_RISE = 2.0
#: the client's median TTFT, late half over early half, that counts as rising
TTFT_RISE = 1.5
#: fewer client TTFTs (or gauge samples) than this: the trend is unknown
MIN_TTFTS = 4

TRANSFER_FAILURES = (
    "sglang:num_transfer_failed_reqs_total",
    "vllm:nixl_num_failed_transfers_total",
)
QUEUE_GAUGES = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
_WORKER_ERRORS = ("smg_worker_errors_total", "smg_worker_retries_exhausted_total")


@dataclass(frozen=True)
class Cite:
    """One metric read: ``series`` of ``source``; ``value`` is a counter's delta over the run
    (``kind="delta"``), a gauge's rise (``"rise"``), its last value (``"last"``), or a count the
    client made (``"client"``)."""

    source: str
    series: str
    value: float
    kind: str = "delta"


@dataclass(frozen=True)
class ClientWindow:
    """What the client measured over the telemetry's window: output tokens received, and
    ``(seconds after the window's start, TTFT seconds)`` of each request that got a first token.
    ``complete`` is False when traffic the client did not count ran in the window (replays)."""

    output_tokens: int
    ttfts: tuple[tuple[float, float], ...] = ()
    complete: bool = True


@dataclass(frozen=True)
class ServerView:
    """What the diagnosis gets besides the localization's evidence: the run's telemetry, each
    engine service's role (``prefill``/``decode``; else the role its source recorded), and the
    client's view of the same window."""

    run: RunTelemetry | None
    roles: Mapping[str, str] = field(default_factory=dict)
    client: ClientWindow | None = None


@dataclass(frozen=True)
class TelemetryEvidence:
    """One rule's reading of one subject (a service, or ``decodes`` for the client rule)."""

    rule: str
    subject: str
    state: State
    #: the layer it points at when fired (:data:`WORKERS` for router-counted worker errors)
    points_at: PointsAt | None = None
    worker: str | None = None
    cites: tuple[Cite, ...] = ()
    reason: str | None = None
    threshold: float | None = None

    @property
    def id(self) -> str:
        return f"telemetry.{self.rule}.{self.subject}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "subject": self.subject,
            "state": self.state,
            "points_at": self.points_at,
            "worker": self.worker,
            "cites": [_cite(c) for c in self.cites],
            "reason": self.reason,
            "threshold": self.threshold,
        }


@dataclass(frozen=True, slots=True)
class TelemetryReading:
    """One piece of run-telemetry evidence as a soak's numbered fact
    (``telemetry.<rule>.<subject>``; one of :data:`servelab.core.soak.observe.Observation`)."""

    id: str
    subject: str
    healthy: bool | None
    evidence: TelemetryEvidence
    kind: Literal["telemetry"] = field(default="telemetry", init=False)


def _cite(c: Cite) -> dict[str, Any]:
    return {"source": c.source, "series": c.series, "value": c.value, "kind": c.kind}


def _grown(src: SourceTelemetry, names: Sequence[str]) -> list[Cite]:
    """Every series of ``names`` that grew over the run."""
    return [
        Cite(src.service, k, v)
        for k, v in sorted(src.counters.items())
        if v > 0 and any(k == n or k.startswith(n + "{") for n in names)
    ]


def _unknown(rule: str, src: SourceTelemetry) -> TelemetryEvidence:
    return TelemetryEvidence(rule, src.service, UNKNOWN, reason=src.reason or "did not answer")


# ------------------------------------------------------------------------------------- router
def _router_refusals(src: SourceTelemetry) -> list[Cite]:
    refused = [
        c for c in _grown(src, ("smg_http_responses_total",)) if 'status_code="5' in c.series
    ]
    opened = [
        c for c in _grown(src, ("smg_worker_cb_transitions_total",)) if 'to="open"' in c.series
    ]
    open_now = [
        Cite(src.service, k, points[-1][1], "last")
        for k, points in sorted(src.gauges.items())
        if k.startswith("smg_worker_cb_state{") and points and points[-1][1] == 1
    ]
    return refused + opened + open_now


def _rule_router(src: SourceTelemetry) -> TelemetryEvidence:
    if src.state != "ok":
        return _unknown(RULE_ROUTER, src)
    workers = _grown(src, _WORKER_ERRORS)
    if workers:
        cites = tuple(workers + _grown(src, ("smg_worker_retries_total",)))
        return TelemetryEvidence(RULE_ROUTER, src.service, FIRED, WORKERS, cites=cites)
    refused = _router_refusals(src)
    if refused:
        cites = tuple(refused)
        return TelemetryEvidence(RULE_ROUTER, src.service, FIRED, Layer.ROUTER, cites=cites)
    return TelemetryEvidence(RULE_ROUTER, src.service, QUIET)


# ------------------------------------------------------------------------------------ engines
def _rule_transfer(src: SourceTelemetry) -> TelemetryEvidence:
    if src.state != "ok":
        return _unknown(RULE_TRANSFER, src)
    failed = _grown(src, TRANSFER_FAILURES)
    if not failed:
        return TelemetryEvidence(RULE_TRANSFER, src.service, QUIET)
    return TelemetryEvidence(
        RULE_TRANSFER, src.service, FIRED, Layer.DECODE_TRANSFER, src.service, tuple(failed)
    )


def _halves(values: Sequence[float]) -> tuple[float, float]:
    mid = len(values) // 2
    return statistics.fmean(values[:mid]), statistics.fmean(values[len(values) - mid :])


def _queue_rise(src: SourceTelemetry) -> Cite | None:
    """The queue gauge's rise (summed over label sets sample by sample); None: too few samples."""
    series = [p for k, p in src.gauges.items() if k.split("{", 1)[0] in QUEUE_GAUGES]
    if not series or min(len(p) for p in series) < MIN_TTFTS:
        return None
    n = min(len(p) for p in series)
    total = [sum(p[i][1] for p in series) for i in range(n)]
    early, late = _halves(total)
    name = next(k for k in src.gauges if k.split("{", 1)[0] in QUEUE_GAUGES).split("{", 1)[0]
    return Cite(src.service, name, round(late - early, 3), "rise")


def _ttft_rise(client: ClientWindow | None) -> float | None:
    if client is None or len(client.ttfts) < MIN_TTFTS:
        return None
    ordered = [t for _, t in sorted(client.ttfts)]
    mid = len(ordered) // 2
    early, late = statistics.median(ordered[:mid]), statistics.median(ordered[-mid:])
    return late / early if early > 0 else None


def _rule_saturation(src: SourceTelemetry, client: ClientWindow | None) -> TelemetryEvidence:
    if src.state != "ok":
        return _unknown(RULE_SATURATION, src)
    queue, ttft = _queue_rise(src), _ttft_rise(client)
    if queue is None or ttft is None:
        why = "too few queue samples" if queue is None else "too few client TTFTs"
        return TelemetryEvidence(RULE_SATURATION, src.service, UNKNOWN, reason=why)
    cites = (queue, Cite("client", "ttft_median_late_over_early", round(ttft, 3), "client"))
    if queue.value >= QUEUE_RISE and ttft >= TTFT_RISE:
        return TelemetryEvidence(
            RULE_SATURATION, src.service, FIRED, Layer.ENGINE_SATURATION, src.service, cites,
            threshold=QUEUE_RISE,
        )  # fmt: skip
    return TelemetryEvidence(RULE_SATURATION, src.service, QUIET, cites=cites)


# ------------------------------------------------------------------------ client against servers
def _decode_tokens(decodes: Sequence[SourceTelemetry]) -> tuple[float, list[Cite]]:
    cites = [
        Cite(s.service, name, value)
        for s in decodes
        for name in GENERATED_TOKENS
        if (value := s.counter(name)) is not None
    ]
    return sum(c.value for c in cites), cites


def _rule_client(
    decodes: Sequence[SourceTelemetry], client: ClientWindow | None
) -> TelemetryEvidence:
    def unknown(why: str, cites: Sequence[Cite] = ()) -> TelemetryEvidence:
        return TelemetryEvidence(RULE_CLIENT, "decodes", UNKNOWN, cites=tuple(cites), reason=why,
                                 threshold=CLIENT_TOLERANCE)  # fmt: skip

    silent = [s.service for s in decodes if s.state != "ok"]
    if not decodes or silent:
        return unknown(f"decode(s) did not answer: {', '.join(silent)}" if silent else "no decode")
    if client is None or not client.complete:
        return unknown("the client did not count all the traffic in the window")
    served, cites = _decode_tokens(decodes)
    cites.append(Cite("client", "output_tokens", float(client.output_tokens), "client"))
    if served < MIN_TOKENS:
        return unknown(f"fewer than {MIN_TOKENS} tokens counted by the decodes", cites)
    off = abs(client.output_tokens - served) / served
    state: State = FIRED if off > CLIENT_TOLERANCE else QUIET
    return TelemetryEvidence(
        RULE_CLIENT, "decodes", state, Layer.CLIENT if state == FIRED else None, None,
        (*cites, Cite("client", "relative_difference", round(off, 4), "client")),
        threshold=CLIENT_TOLERANCE,
    )  # fmt: skip


def _role(view: ServerView, src: SourceTelemetry) -> str:
    return view.roles.get(src.service) or src.role


def client_window(records: Sequence[RequestRecord], t0_ns: int | None = None) -> ClientWindow:
    """A bench run's client view: every record's output tokens, and the TTFT of each that got a
    first token (at its send time after ``t0_ns``, the earliest send by default)."""
    sent = [r.sent_ns for r in records if r.sent_ns]
    start = t0_ns if t0_ns is not None else min(sent, default=0)
    ttfts = tuple(
        ((r.sent_ns - start) / 1e9, (r.event_ns[0] - r.sent_ns) / 1e9)
        for r in records
        if r.event_ns and r.sent_ns
    )
    return ClientWindow(sum(r.output_tokens for r in records), ttfts)


def assess(view: ServerView | None) -> tuple[TelemetryEvidence, ...]:
    """Every rule over every source of the run (nothing when no telemetry was recorded)."""
    if view is None or view.run is None:
        return ()
    out = []
    for src in view.run.sources:
        if src.kind == "router":
            out.append(_rule_router(src))
            continue
        if _role(view, src) == "decode":
            out.append(_rule_transfer(src))
        out.append(_rule_saturation(src, view.client))
    decodes = [s for s in view.run.sources if _role(view, s) == "decode"]
    out.append(_rule_client(decodes, view.client))
    return tuple(out)


def telemetry_observations(evidence: Sequence[TelemetryEvidence]) -> list[TelemetryReading]:
    """Each piece of evidence as a numbered fact: fired is unhealthy, quiet healthy, unknown
    neutral, never healthy."""
    return [
        TelemetryReading(e.id, e.subject, None if e.state == UNKNOWN else e.state == QUIET, e)
        for e in evidence
    ]


def run_evidence(
    run: RunTelemetry, records: Sequence[RequestRecord]
) -> tuple[TelemetryEvidence, ...]:
    """The rules over one bench run: its telemetry (roles as its sources recorded them) against
    its own records."""
    return assess(ServerView(run, {}, client_window(records)))
