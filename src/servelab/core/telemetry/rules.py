"""The run's own telemetry as evidence: what the router and the engines counted over a run,
read by rules (pure; wording lives in ``report.soak``).

Each rule reads a :class:`~servelab.core.telemetry.summary.RunTelemetry` (and, for two of them, what
the client measured over the same window, :class:`ClientWindow`) and returns one
:class:`TelemetryEvidence` per source it looked at: ``fired`` (the rule's condition holds; the
:class:`~servelab.core.telemetry.layers.Layer` it points at, or :data:`WORKERS`), ``quiet`` (the
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
- ``engine_saturation`` (each engine): on the engine's own gauges only, in the window of the
  failed requests (:attr:`ServerView.failing`) against a baseline from the same run (every other
  sample), both without the samples taken while servelab's own replays ran
  (:attr:`ServerView.replays`): the waiting queue (``sglang:num_queue_reqs`` /
  ``vllm:num_requests_waiting``) is at least :data:`QUEUE_RISE` requests longer on average than
  in the baseline **and** the engine is at its cap (its running requests,
  ``sglang:num_running_reqs`` / ``vllm:num_requests_running``, at the most it ran over the run,
  or its KV cache at least
  :data:`KV_FULL` used: ``sglang:token_usage`` / ``vllm:kv_cache_usage_perc``) →
  ``engine_saturation``: queueing in the engine, not a network fault. Nothing failed: quiet; too
  few samples in either window: unknown. A proxy's answers and prompts that grow are not read.
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
from typing import Annotated, Any, Final, Literal

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.summary import GENERATED_TOKENS, RunTelemetry, SourceTelemetry
from servelab.core.telemetry.unknown import Unknown, upgrade_evidence

__all__ = [
    "CLIENT_TOLERANCE",
    "FIRED",
    "KV_FULL",
    "KV_GAUGES",
    "MIN_SAMPLES",
    "MIN_TOKENS",
    "QUEUE_GAUGES",
    "QUEUE_RISE",
    "QUIET",
    "RULE_CLIENT",
    "RULE_ROUTER",
    "RULE_SATURATION",
    "RULE_TRANSFER",
    "RUNNING_GAUGES",
    "TRANSFER_FAILURES",
    "UNKNOWN",
    "WORKERS",
    "Cite",
    "ClientWindow",
    "PointsAt",
    "ServerView",
    "TelemetryEvidence",
    "TelemetryReading",
    "Window",
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
#: how much longer the waiting queue is in the failing window than in the baseline (requests,
#: mean against mean) for the engine to count as saturated
QUEUE_RISE = 2.0
#: the KV cache usage (0-1) at which an engine is at its cap
KV_FULL = 0.95
#: fewer samples than this in the failing window or in the baseline: unknown
MIN_SAMPLES = 2

TRANSFER_FAILURES = (
    "sglang:num_transfer_failed_reqs_total",
    "vllm:nixl_num_failed_transfers_total",
)
QUEUE_GAUGES = ("sglang:num_queue_reqs", "vllm:num_requests_waiting")
RUNNING_GAUGES = ("sglang:num_running_reqs", "vllm:num_requests_running")
KV_GAUGES = ("sglang:token_usage", "vllm:kv_cache_usage_perc")

#: A span of the run, seconds after its telemetry's start: ``(from, to)``.
Window = tuple[float, float]
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
    """What the client measured over the telemetry's window: the output tokens it received.
    ``complete`` is False when traffic the client did not count ran in the window (replays)."""

    output_tokens: int
    complete: bool = True


@dataclass(frozen=True)
class ServerView:
    """What the diagnosis gets besides the localization's evidence: the run's telemetry, each
    engine service's role (``prefill``/``decode``; else the role its source recorded), the
    client's view of the same window, when requests failed (``failing``) and when servelab's own
    replays ran (``replays``), both in the telemetry's time base."""

    run: RunTelemetry | None
    roles: Mapping[str, str] = field(default_factory=dict)
    client: ClientWindow | None = None
    failing: tuple[Window, ...] = ()
    replays: tuple[Window, ...] = ()


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
    #: why it could not judge (unknown only), and that reason's detail (a source's own words)
    why: Annotated[Unknown | None, OMITTED_IF_NONE] = None
    detail: Annotated[str | None, OMITTED_IF_NONE] = None
    threshold: float | None = None

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        """Read through :func:`~servelab.core.telemetry.unknown.upgrade_evidence` first: a
        reading stored with an English ``reason`` reads as its code."""
        return core_schema.no_info_before_validator_function(upgrade_evidence, handler(source))

    @property
    def id(self) -> str:
        return f"telemetry.{self.rule}.{self.subject}"


@dataclass(frozen=True, slots=True)
class TelemetryReading:
    """One piece of run-telemetry evidence as a soak's numbered fact
    (``telemetry.<rule>.<subject>``; one of :data:`servelab.core.soak.observation.Observation`)."""

    id: str
    subject: str
    healthy: bool | None
    evidence: TelemetryEvidence
    kind: Literal["telemetry"] = field(default="telemetry", init=False)


def _grown(src: SourceTelemetry, names: Sequence[str]) -> list[Cite]:
    """Every series of ``names`` that grew over the run."""
    return [
        Cite(src.service, k, v)
        for k, v in sorted(src.counters.items())
        if v > 0 and any(k == n or k.startswith(n + "{") for n in names)
    ]


def _unknown(rule: str, src: SourceTelemetry) -> TelemetryEvidence:
    return TelemetryEvidence(
        rule, src.service, UNKNOWN, why=Unknown.SOURCE_SILENT, detail=src.reason or None
    )


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


def _summed(src: SourceTelemetry, names: Sequence[str]) -> dict[float, float]:
    """The gauges of ``names`` summed over their label sets, sample by sample ({at: value})."""
    total: dict[float, float] = {}
    for key, points in src.gauges.items():
        if key.split("{", 1)[0] in names:
            for at, value in points:
                total[at] = total.get(at, 0.0) + value
    return total


def _inside(at: float, windows: Sequence[Window], slack: float = 0.0) -> bool:
    return any(start - slack <= at <= end + slack for start, end in windows)


def _rule_saturation(src: SourceTelemetry, view: ServerView) -> TelemetryEvidence:
    if src.state != "ok":
        return _unknown(RULE_SATURATION, src)
    queue = _summed(src, QUEUE_GAUGES)
    if not queue:
        return TelemetryEvidence(RULE_SATURATION, src.service, UNKNOWN, why=Unknown.NO_QUEUE_GAUGE)
    if not view.failing:
        return TelemetryEvidence(RULE_SATURATION, src.service, QUIET)
    # A sample stands for the second before it (one scrape a second): it is in a window it
    # touches, and replay samples are left out of both windows.
    own = {at: q for at, q in queue.items() if not _inside(at, view.replays, 1.0)}
    failing = [at for at in own if _inside(at, view.failing, 1.0)]
    base = [at for at in own if at not in failing]
    if len(failing) < MIN_SAMPLES or len(base) < MIN_SAMPLES:
        why = Unknown.TOO_FEW_SAMPLES
        return TelemetryEvidence(RULE_SATURATION, src.service, UNKNOWN, why=why)
    rise = statistics.fmean(own[a] for a in failing) - statistics.fmean(own[a] for a in base)
    running, kv = _summed(src, RUNNING_GAUGES), _summed(src, KV_GAUGES)
    cap = max((running[a] for a in own if a in running), default=0.0)
    ran = max((running[a] for a in failing if a in running), default=0.0)
    used = max((kv[a] for a in failing if a in kv), default=None)
    cites = [Cite(src.service, QUEUE_GAUGES[0], round(rise, 3), "rise")]
    cites.append(Cite(src.service, RUNNING_GAUGES[0], ran, "last"))
    if used is not None:
        cites.append(Cite(src.service, KV_GAUGES[0], used, "last"))
    at_cap = (cap > 0 and ran >= cap) or (used is not None and used >= KV_FULL)
    if rise >= QUEUE_RISE and at_cap:
        return TelemetryEvidence(
            RULE_SATURATION, src.service, FIRED, Layer.ENGINE_SATURATION, src.service,
            tuple(cites), threshold=QUEUE_RISE,
        )  # fmt: skip
    return TelemetryEvidence(RULE_SATURATION, src.service, QUIET, cites=tuple(cites))


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
    def unknown(
        why: Unknown, cites: Sequence[Cite] = (), detail: str | None = None
    ) -> TelemetryEvidence:
        return TelemetryEvidence(RULE_CLIENT, "decodes", UNKNOWN, cites=tuple(cites), why=why,
                                 detail=detail, threshold=CLIENT_TOLERANCE)  # fmt: skip

    silent = [s.service for s in decodes if s.state != "ok"]
    if not decodes or silent:
        if silent:
            return unknown(Unknown.DECODES_SILENT, detail=", ".join(silent))
        return unknown(Unknown.NO_DECODE)
    if client is None or not client.complete:
        return unknown(Unknown.CLIENT_INCOMPLETE)
    served, cites = _decode_tokens(decodes)
    cites.append(Cite("client", "output_tokens", float(client.output_tokens), "client"))
    if served < MIN_TOKENS:
        return unknown(Unknown.TOO_FEW_TOKENS, cites)
    off = abs(client.output_tokens - served) / served
    state: State = FIRED if off > CLIENT_TOLERANCE else QUIET
    return TelemetryEvidence(
        RULE_CLIENT, "decodes", state, Layer.CLIENT if state == FIRED else None, None,
        (*cites, Cite("client", "relative_difference", round(off, 4), "client")),
        threshold=CLIENT_TOLERANCE,
    )  # fmt: skip


def _role(view: ServerView, src: SourceTelemetry) -> str:
    return view.roles.get(src.service) or src.role


def client_window(records: Sequence[RequestRecord]) -> ClientWindow:
    """A bench run's client view: every record's output tokens."""
    return ClientWindow(sum(r.output_tokens for r in records))


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
        out.append(_rule_saturation(src, view))
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
