"""The numbered facts a localization's evidence gives: one frozen dataclass per kind (pure; the
evidence is :mod:`servelab.core.soak.evidence`, the facts are read from it by
:mod:`servelab.core.soak.observe`, the rules are :mod:`servelab.core.soak.diagnose`).

The :data:`Observation` union holds every kind (``kind`` tells them apart once stored). Each has a
stable ``id`` (``replay.fresh_entry``, ``probe.decode.health``...: findings name their supporting
and contradicting observations by it, in the ledger too), a ``subject`` (what it is about) and
``healthy``: True, False, or None (neutral, or **unknown** — :func:`is_unknown`: a source that did
not answer is never counted healthy). The run telemetry's facts are
:class:`~servelab.core.telemetry.rules.TelemetryReading`. Their words are ``report.soak.words``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from servelab.core.soak.evidence import CorrectnessIssue, Probe, Replay
from servelab.core.soak.replay import Cell, Hop
from servelab.core.soak.signatures import Signature
from servelab.core.telemetry.router import WorkerLoad
from servelab.core.telemetry.rules import UNKNOWN, TelemetryReading
from servelab.core.verify.coldstart import StartClass
from servelab.core.verify.pair import PairReport

__all__ = [
    "CorrectnessViolations",
    "EngineProgress",
    "EngineStart",
    "FreshConnectionStalls",
    "FrontAnswers",
    "LoadReading",
    "MatrixBisection",
    "MatrixCell",
    "Observation",
    "OpenCircuit",
    "PairMismatch",
    "ProbeResult",
    "ReplayResult",
    "Resends",
    "ReusedConnectionStalls",
    "RouterHealth",
    "SignatureFailures",
    "Stalls",
    "TransferFailures",
    "UnhealthyWorker",
    "is_unknown",
]


@dataclass(frozen=True, slots=True)
class Stalls:
    """``stalls``: how many requests stalled, how many of them before any response byte."""

    id: str
    subject: str
    healthy: bool | None
    count: int
    head: int
    kind: Literal["stalls"] = field(default="stalls", init=False)


@dataclass(frozen=True, slots=True)
class ReusedConnectionStalls:
    """``stalls.reused_connection``: stalls on kept-alive connections, and how many requests
    those connections had carried before."""

    id: str
    subject: str
    healthy: bool | None
    count: int
    requests_carried: tuple[int, ...]
    kind: Literal["stalls.reused_connection"] = field(
        default="stalls.reused_connection", init=False
    )


@dataclass(frozen=True, slots=True)
class FreshConnectionStalls:
    """``stalls.fresh_connection``: stalls on a connection's first request."""

    id: str
    subject: str
    healthy: bool | None
    count: int
    kind: Literal["stalls.fresh_connection"] = field(default="stalls.fresh_connection", init=False)


@dataclass(frozen=True, slots=True)
class SignatureFailures:
    """``failure.<signature>``: the failures of one signature, and the first one's details."""

    id: str
    subject: str
    healthy: bool | None
    signature: Signature
    count: int
    session: int
    round: int
    status: int | None
    error: str
    detail: str
    payload_bytes: int
    connection_requests: tuple[int, ...]
    kind: Literal["failure"] = field(default="failure", init=False)


@dataclass(frozen=True, slots=True)
class FrontAnswers:
    """``answers.front``: failed requests whose answer came without the request's own
    ``x-request-id`` while the router's answers through the same entry carry it: a hop in front
    of the router answered them (with these ``Server`` headers and statuses)."""

    id: str
    subject: str
    healthy: bool | None
    count: int
    servers: tuple[str, ...]
    statuses: tuple[int, ...]
    kind: Literal["answers.front"] = field(default="answers.front", init=False)


@dataclass(frozen=True, slots=True)
class Resends:
    """``resends``: requests the client sent again (masked failures), with the idle times before
    those the server's close caused, the statuses a retrying client retried after, and the hop."""

    id: str
    subject: str
    healthy: bool | None
    count: int
    idle_s: tuple[float, ...]
    hop: Hop
    statuses: tuple[int, ...] = ()
    kind: Literal["resends"] = field(default="resends", init=False)


@dataclass(frozen=True, slots=True)
class MatrixCell:
    """``matrix.<hop>.<target>.<payload>.<mode>``: one replay matrix cell (or bisection step)."""

    id: str
    subject: str
    healthy: bool | None
    cell: Cell
    kind: Literal["matrix.cell"] = field(default="matrix.cell", init=False)


@dataclass(frozen=True, slots=True)
class MatrixBisection:
    """``matrix.bisect``: the largest payload that got through the hop, the smallest that failed."""

    id: str
    subject: str
    healthy: bool | None
    hop: Hop
    target: str
    ok_bytes: int | None
    fail_bytes: int | None
    kind: Literal["matrix.bisect"] = field(default="matrix.bisect", init=False)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """``replay.<path>``: the stalled payload sent again (read from the matrix's cells)."""

    id: str
    subject: str
    healthy: bool | None
    replay: Replay
    kind: Literal["replay"] = field(default="replay", init=False)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """``probe.<service>.<kind>``: one HTTP look at a service."""

    id: str
    subject: str
    healthy: bool | None
    probe: Probe
    kind: Literal["probe"] = field(default="probe", init=False)


@dataclass(frozen=True, slots=True)
class EngineProgress:
    """``metrics.<service>.progress``: what an engine's two scrapes say (``known`` False: a
    scrape did not answer, the rest is unset). Unhealthy when frozen."""

    id: str
    subject: str
    healthy: bool | None
    role: str
    known: bool
    running: float | None = None
    queued: float | None = None
    generated_delta: float = 0.0
    requests_delta: float = 0.0
    prompt_tokens_delta: float = 0.0
    in_transfer: float | None = None
    interval_s: float = 0.0
    kind: Literal["metrics.progress"] = field(default="metrics.progress", init=False)


@dataclass(frozen=True, slots=True)
class TransferFailures:
    """``metrics.<service>.transfer_failed``: the engine's failed KV transfers grew."""

    id: str
    subject: str
    healthy: bool | None
    role: str
    delta: float
    kind: Literal["metrics.transfer_failed"] = field(default="metrics.transfer_failed", init=False)


@dataclass(frozen=True, slots=True)
class RouterHealth:
    """``router_metrics``: the router's own metrics (``known`` False: its port did not answer);
    unhealthy when a circuit is open or a worker unhealthy."""

    id: str
    subject: str
    healthy: bool | None
    known: bool
    inflight_aged: float = 0.0
    errors: Mapping[str, float] = field(default_factory=dict)
    pd_ttft_s: float | None = None  # smg's mean PD TTFT since it started (None: not measured)
    kind: Literal["router_metrics"] = field(default="router_metrics", init=False)


@dataclass(frozen=True, slots=True)
class OpenCircuit:
    """``router_metrics.cb_open.<worker>``: the router's circuit breaker is open for a worker."""

    id: str
    subject: str
    healthy: bool | None
    worker: str
    state: float
    kind: Literal["router_metrics.cb_open"] = field(default="router_metrics.cb_open", init=False)


@dataclass(frozen=True, slots=True)
class UnhealthyWorker:
    """``router_metrics.unhealthy.<worker>``: the router marks a worker unhealthy."""

    id: str
    subject: str
    healthy: bool | None
    worker: str
    kind: Literal["router_metrics.unhealthy"] = field(
        default="router_metrics.unhealthy", init=False
    )


@dataclass(frozen=True, slots=True)
class LoadReading:
    """``load.<source>.<service>``: a worker's load, as the router or the engine reports it."""

    id: str
    subject: str
    healthy: bool | None
    load: WorkerLoad
    kind: Literal["load"] = field(default="load", init=False)


@dataclass(frozen=True, slots=True)
class EngineStart:
    """``engines.start``: whether the engines were cold when the soak began (cold: neutral)."""

    id: str
    subject: str
    healthy: bool | None
    start: StartClass
    kind: Literal["engines.start"] = field(default="engines.start", init=False)


@dataclass(frozen=True, slots=True)
class CorrectnessViolations:
    """``correctness.<issue>``: the violations of one kind, the first few as examples."""

    id: str
    subject: str
    healthy: bool | None
    issue: str
    count: int
    examples: tuple[CorrectnessIssue, ...]
    kind: Literal["correctness"] = field(default="correctness", init=False)


@dataclass(frozen=True, slots=True)
class PairMismatch:
    """``pair.<prefill>.<decode>``: the two workers disagree on what the KV hand-off carries
    (verify's pair layer, :mod:`servelab.core.verify.pair`); unhealthy."""

    id: str
    subject: str
    healthy: bool | None
    pair: PairReport
    kind: Literal["pair.mismatch"] = field(default="pair.mismatch", init=False)


#: Every kind of numbered fact; a renderer matches on it (``typing.assert_never`` finds a gap).
Observation = (
    Stalls
    | ReusedConnectionStalls
    | FreshConnectionStalls
    | SignatureFailures
    | FrontAnswers
    | Resends
    | MatrixCell
    | MatrixBisection
    | ReplayResult
    | ProbeResult
    | EngineProgress
    | TransferFailures
    | RouterHealth
    | OpenCircuit
    | UnhealthyWorker
    | LoadReading
    | EngineStart
    | CorrectnessViolations
    | PairMismatch
    | TelemetryReading
)


def is_unknown(o: Observation) -> bool:
    """A source that did not answer (neutral, never healthy)."""
    match o:
        case EngineProgress() | RouterHealth():
            return not o.known
        case LoadReading():
            return o.load.load is None
        case TelemetryReading():
            return o.evidence.state == UNKNOWN
        case _:
            return False
