"""The numbered facts a localization's evidence gives (pure; the evidence is
:mod:`servelab.core.soak.evidence`, the rules :mod:`servelab.core.soak.diagnose`).

:func:`observations` turns one :class:`~servelab.core.soak.evidence.SoakEvidence` into facts, one
frozen dataclass per kind (the :data:`Observation` union; ``kind`` tells them apart once stored).
Each has a stable ``id`` (``replay.fresh_entry``, ``probe.decode.health``...: findings name their
supporting and contradicting observations by it, in the ledger too), a ``subject`` (what it is
about) and ``healthy``: True, False, or None (neutral, or **unknown** — :func:`is_unknown`: a
source that did not answer is never counted healthy). The run telemetry's facts are
:class:`~servelab.core.telemetry.rules.TelemetryReading`. Their words are ``report.soak.words``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from servelab.core.soak.evidence import (
    GENERATED,
    PROMPT,
    QUEUED,
    REQUESTS,
    RUNNING,
    TRANSFER_FAILED,
    CorrectnessIssue,
    Probe,
    Replay,
    SoakEvidence,
)
from servelab.core.soak.replay import Cell, Hop
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.telemetry.router import WorkerLoad
from servelab.core.telemetry.rules import UNKNOWN, TelemetryReading
from servelab.core.verify.coldstart import Start, StartClass
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
    "observations",
]

#: Correctness violations an observation shows at most, as examples.
_EXAMPLES = 3

_Ids = Callable[[str], str]


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


#: Every kind of numbered fact; a renderer matches on it (``typing.assert_never`` finds a gap).
@dataclass(frozen=True, slots=True)
class PairMismatch:
    """``pair.<prefill>.<decode>``: the two workers disagree on what the KV hand-off carries
    (verify's pair layer, :mod:`servelab.core.verify.pair`); unhealthy."""

    id: str
    subject: str
    healthy: bool | None
    pair: PairReport
    kind: Literal["pair.mismatch"] = field(default="pair.mismatch", init=False)


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


# ------------------------------------------------------------------------------- observations
def _stall_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    if not ev.stalls:
        return []
    reused = [s for s in ev.stalls if s.connection_requests > 0]
    fresh = [s for s in ev.stalls if s.connection_requests == 0]
    head = sum(s.phase == Phase.HEAD for s in ev.stalls)
    obs: list[Observation] = [Stalls(at("stalls"), "entry", False, len(ev.stalls), head)]
    if reused:
        carried = tuple(sorted({s.connection_requests for s in reused}))
        obs.append(
            ReusedConnectionStalls(
                at("stalls.reused_connection"), "entry", False, len(reused), carried
            )
        )
    if fresh:
        obs.append(FreshConnectionStalls(at("stalls.fresh_connection"), "entry", False, len(fresh)))
    return obs


def _replay_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    return [
        ReplayResult(at(f"replay.{r.path}"), r.path.value, r.outcome == Outcome.OK, r)
        for r in ev.replays
    ]


def _probe_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    return [ProbeResult(at(f"probe.{p.service}.{p.kind}"), p.service, p.ok, p) for p in ev.probes]


def _engine_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    obs: list[Observation] = []
    for e in ev.engines:
        progress = at(f"metrics.{e.service}.progress")
        if not e.known:
            obs.append(EngineProgress(progress, e.service, None, e.role, known=False))
            continue
        obs.append(
            EngineProgress(
                progress, e.service, not e.frozen, e.role, True, e.after.get(RUNNING),
                e.after.get(QUEUED), e.delta(GENERATED), e.delta(REQUESTS), e.delta(PROMPT),
                e.in_transfer, round(e.interval_s, 3),
            )
        )  # fmt: skip
        failed = e.delta(TRANSFER_FAILED)
        if failed > 0:
            transfer = at(f"metrics.{e.service}.transfer_failed")
            obs.append(TransferFailures(transfer, e.service, False, e.role, failed))
    return obs


def _issue_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    obs: list[Observation] = []
    for kind in ("tool_call_json", "nondeterministic", "answer_wrong", "answer_kv_transfer"):
        found = [i for i in ev.issues if i.kind == kind]
        if found:
            examples = tuple(found[:_EXAMPLES])
            ident = at(f"correctness.{kind}")
            obs.append(CorrectnessViolations(ident, "answers", False, kind, len(found), examples))
    return obs


def _failure_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    by_sig: dict[Signature, list[Failure]] = {}
    for f in ev.failures:
        by_sig.setdefault(f.signature, []).append(f)
    obs: list[Observation] = []
    for sig, found in by_sig.items():
        first = found[0]
        carried = tuple(sorted({f.connection_requests for f in found}))
        obs.append(
            SignatureFailures(
                at(f"failure.{sig}"), "entry", False, sig, len(found), first.session, first.round,
                first.status, first.error, first.detail[:200], first.payload_bytes, carried,
            )
        )  # fmt: skip
    return obs


def _front_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    """Failed answers without the request's id, when the router's answers carry it."""
    if not (ev.via_proxy and ev.router_echoes):
        return []
    front = [f for f in ev.failures if f.echoed_id is False and f.status is not None]
    if not front:
        return []
    servers = tuple(sorted({f.server for f in front if f.server}))
    statuses = tuple(sorted({f.status for f in front if f.status is not None}))
    return [FrontAnswers(at("answers.front"), "entry", False, len(front), servers, statuses)]


def _resend_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    if not ev.resends:
        return []
    closed = [r for r in ev.resends if r.status is None]
    idle = tuple(sorted({round(r.idle_s, 1) for r in closed}))
    statuses = tuple(sorted({r.status for r in ev.resends if r.status is not None}))
    hop = ev.resends[0].hop
    return [Resends(at("resends"), "entry", False, len(ev.resends), idle, hop, statuses)]


def _matrix_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    if ev.matrix is None:
        return []
    b = ev.matrix.bisection
    cells = (*ev.matrix.cells, *(() if b is None else b.steps))
    obs: list[Observation] = [
        MatrixCell(at(c.id), c.target, None if c.undecided else c.ok, c) for c in cells
    ]
    if b is not None:
        obs.append(
            MatrixBisection(at("matrix.bisect"), b.target, None, b.hop, b.target, b.ok_bytes,
                            b.fail_bytes)
        )  # fmt: skip
    return obs


def _router_metric_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    m = ev.router_metrics
    if m is None:
        return []
    if not m.known:
        return [RouterHealth(at("router_metrics"), "router", None, known=False)]
    healthy = not (m.open_circuits or m.unhealthy)
    seen = (healthy, True, m.inflight, dict(m.errors), m.pd_ttft_s)
    obs: list[Observation] = [RouterHealth(at("router_metrics"), "router", *seen)]
    obs += [
        OpenCircuit(at(f"router_metrics.cb_open.{w}"), w, False, w, m.cb_state[w])
        for w in m.open_circuits
    ]
    obs += [UnhealthyWorker(at(f"router_metrics.unhealthy.{w}"), w, False, w) for w in m.unhealthy]
    return obs


def _context_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    obs: list[Observation] = [
        LoadReading(at(f"load.{x.source}.{x.service}"), x.service, None, x) for x in ev.loads
    ]
    if ev.start is not None:
        healthy = None if ev.start.start == Start.COLD else True
        obs.append(EngineStart(at("engines.start"), "engines", healthy, ev.start))
    return obs


def _scoped(scope: Signature | None) -> _Ids:
    """An observation's id in its evidence's scope (``<signature>:<id>`` after the first)."""
    prefix = "" if scope is None else f"{scope}:"
    return lambda ident: prefix + ident


def observations(ev: SoakEvidence) -> list[Observation]:
    """Every fact of ``ev``, with a stable id (``replay.fresh_entry``, ``probe.decode.health``…;
    prefixed with ``ev.scope``)."""
    at = _scoped(ev.scope)
    return [
        *_stall_observations(ev, at),
        *_failure_observations(ev, at),
        *_front_observations(ev, at),
        *_resend_observations(ev, at),
        *_matrix_observations(ev, at),
        *_replay_observations(ev, at),
        *_probe_observations(ev, at),
        *_engine_observations(ev, at),
        *_router_metric_observations(ev, at),
        *_context_observations(ev, at),
        *_issue_observations(ev, at),
        *_pair_observations(ev, at),
    ]


def _pair_observations(ev: SoakEvidence, at: _Ids) -> list[Observation]:
    return [PairMismatch(at(f"pair.{p.prefill}.{p.decode}"), p.decode, False, p) for p in ev.pairs]
