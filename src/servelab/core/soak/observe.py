"""The numbered facts of a localization's evidence, read from it (pure; the evidence is
:mod:`servelab.core.soak.evidence`, the facts' types :mod:`servelab.core.soak.observation`, the
rules :mod:`servelab.core.soak.diagnose`).

:func:`observations` turns one :class:`~servelab.core.soak.evidence.SoakEvidence` into facts, one
per stall kind, failure signature, replay, matrix cell, probe, engine, router metric, load, start,
correctness issue and KV hand-off pair, each with its stable ``id`` (prefixed with the evidence's
scope).
"""

from __future__ import annotations

from collections.abc import Callable

from servelab.core.soak.evidence import (
    GENERATED,
    PROMPT,
    QUEUED,
    REQUESTS,
    RUNNING,
    TRANSFER_FAILED,
    SoakEvidence,
)
from servelab.core.soak.observation import (
    CorrectnessViolations,
    EngineProgress,
    EngineStart,
    FreshConnectionStalls,
    FrontAnswers,
    LoadReading,
    MatrixBisection,
    MatrixCell,
    Observation,
    OpenCircuit,
    PairMismatch,
    ProbeResult,
    ReplayResult,
    Resends,
    ReusedConnectionStalls,
    RouterHealth,
    SignatureFailures,
    Stalls,
    TransferFailures,
    UnhealthyWorker,
)
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.verify.coldstart import Start

__all__ = ["observations"]

#: Correctness violations an observation shows at most, as examples.
_EXAMPLES = 3

_Ids = Callable[[str], str]


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
