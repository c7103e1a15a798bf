"""The soak's words: a sentence for every kind of observation, a title and advice for every layer,
and a finding's evidence worded (pure; returns str).

The rules (:mod:`servelab.core.soak.diagnose`) and the result
(:mod:`servelab.core.soak.result`) hold codes, ids and numbers; every sentence a person reads is
written here, by ``match`` on the type (``typing.assert_never``: a kind without words does not
type-check), for a live result and a ledger row alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from servelab.core.soak.creep import RULE_CREEP
from servelab.core.soak.evidence import ReplayPath
from servelab.core.soak.finding import Dropped, DropReason, Finding
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
from servelab.core.soak.replay import Hop
from servelab.core.soak.signatures import Outcome
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import (
    MIN_TOKENS,
    QUIET,
    RULE_CLIENT,
    RULE_ROUTER,
    RULE_SATURATION,
    RULE_TRANSFER,
    UNKNOWN,
    WORKERS,
    Cite,
    TelemetryEvidence,
    TelemetryReading,
)
from servelab.core.telemetry.unknown import Unknown
from servelab.report.pair import describe_pair
from servelab.report.soak.creep import creep_text

__all__ = [
    "EvidenceLine",
    "describe_observation",
    "dropped_text",
    "finding_evidence",
    "hop_title",
    "layer_advice",
    "layer_title",
    "one_line",
    "telemetry_text",
    "unknown_text",
]


def layer_title(layer: Layer) -> str:
    """What a finding of ``layer`` blames, as its title."""
    match layer:
        case Layer.CLIENT_PROXY:
            return "client / proxy layer (connection reuse, or the proxy itself)"
        case Layer.PD_PAIR:
            return "the P/D pair: prefill and decode disagree on what the KV hand-off carries"
        case Layer.ROUTER:
            return "router"
        case Layer.PREFILL:
            return "prefill engine"
        case Layer.DECODE_TRANSFER:
            return "KV transfer / decode path"
        case Layer.ENGINE_WEDGE:
            return "engine wedged while its health says 200"
        case Layer.CORRECTNESS:
            return "correctness under load"
        case Layer.ENGINE_SATURATION:
            return "engine saturated (queueing), not a network fault"
        case Layer.CLIENT:
            return "the client (the load generator, or what sits in front of the router)"
        case _:
            assert_never(layer)


def layer_advice(layer: Layer) -> str:
    """What to look at first when a finding blames ``layer``."""
    match layer:
        case Layer.CLIENT_PROXY:
            return (
                "The same payload succeeds on a fresh connection and directly at the router: "
                "look at the proxy or client between the agents and the router (keep-alive "
                "reuse) before touching the engines or their knobs."
            )
        case Layer.PD_PAIR:
            return (
                "The prefill and the decode report different page sizes, KV cache dtypes, models "
                "or transfer backends: the KV they exchange cannot be read as sent (SGLang: wrong "
                "answers; vLLM: the handshake fails). Make the two agree (`servelab verify "
                "--layer pair` names both values and where each came from); no knob of either "
                "engine explains the failure."
            )
        case Layer.ROUTER:
            return (
                "Requests through the router fail while nothing reaches the engines, or the "
                "router reports unready workers: look at the router (readiness, worker "
                "registration, circuit breaker) first."
            )
        case Layer.PREFILL:
            return "The prefill engine is unhealthy or stuck: look at the prefill worker first."
        case Layer.DECODE_TRANSFER:
            return (
                "Prefill keeps serving, but decode makes no progress and requests through the "
                "router hang while every health endpoint says 200: look at the KV transfer / "
                "decode path (bootstrap, WaitingForInput, abort handling)."
            )
        case Layer.ENGINE_WEDGE:
            return (
                "An engine holds requests but produces no tokens while its /health says 200: "
                "the engine's scheduler is wedged."
            )
        case Layer.CORRECTNESS:
            return (
                "Answers are wrong under load (tool-call arguments that are not JSON, or a "
                "greedy request whose text changes with concurrency)."
            )
        case Layer.ENGINE_SATURATION:
            return (
                "While the requests failed, the engine ran at its cap (running requests or KV "
                "cache) with a longer waiting queue than the rest of the soak: the engine is "
                "saturated (add capacity or lower the load); the network is not at fault."
            )
        case Layer.CLIENT:
            return (
                "The client received a different number of output tokens than the decodes "
                "counted over the same window: the load generator (or a proxy in front of the "
                "router) is not seeing what the servers produced; fix the client before reading "
                "its numbers."
            )
        case _:
            assert_never(layer)


def hop_title(hop: Hop) -> str:
    match hop:
        case Hop.PAIR:
            return "straight to the pair"
        case Hop.ROUTER:
            return "straight to the router"
        case Hop.FRESH:
            return "entry, fresh connection"
        case Hop.REUSED:
            return "entry, reused connection"
        case _:
            assert_never(hop)


# --------------------------------------------------------------------------------- telemetry
_RULE_WORDS = {
    RULE_ROUTER: "router counters",
    RULE_TRANSFER: "KV transfer counters",
    RULE_SATURATION: "waiting queue at the engine's cap",
    RULE_CLIENT: "client tokens against the decodes' count",
}
#: What a fired rule found, by what it points at (the others: "fired").
_POINTS_WORDS = {
    WORKERS: "the router counted its workers failing",
    Layer.ROUTER: "the router refused requests itself",
    Layer.DECODE_TRANSFER: "KV transfers failed",
    Layer.ENGINE_SATURATION: "the queue grew with the engine at its cap while requests failed",
    Layer.CLIENT: "the client and the decodes disagree",
}


def _cite_text(c: Cite) -> str:
    if c.kind == "delta":
        return f"{c.series} +{c.value:g}"
    if c.kind == "rise":
        return f"{c.series} rose {c.value:g}"
    if c.kind == "last":
        return f"{c.series} = {c.value:g} at the end"
    return f"{c.series} {c.value:g}"


def unknown_text(e: TelemetryEvidence) -> str:
    """Why a rule's reading is unknown, in words (from its stored code and detail)."""
    match e.why:
        case None:
            return "no answer"
        case Unknown.SOURCE_SILENT:
            return e.detail or "did not answer"
        case Unknown.NO_QUEUE_GAUGE:
            return "no queue gauge"
        case Unknown.TOO_FEW_SAMPLES:
            return "too few samples in the failing window or the baseline"
        case Unknown.DECODES_SILENT:
            return f"decode(s) did not answer: {e.detail or '?'}"
        case Unknown.NO_DECODE:
            return "no decode"
        case Unknown.CLIENT_INCOMPLETE:
            return "the client did not count all the traffic in the window"
        case Unknown.TOO_FEW_TOKENS:
            return f"fewer than {MIN_TOKENS} tokens counted by the decodes"
        case _:
            assert_never(e.why)


def telemetry_text(e: TelemetryEvidence) -> str:
    """One sentence for a run-telemetry rule's reading (``telemetry.<rule>.<subject>``)."""
    if e.rule == RULE_CREEP:
        return creep_text(e)
    what = f"{e.subject} {_RULE_WORDS.get(e.rule, e.rule)} over the run"
    if e.state == UNKNOWN:
        return f"{what}: UNKNOWN ({unknown_text(e)}; not healthy)"
    cites = "; ".join(_cite_text(c) for c in e.cites)
    if e.state == QUIET:
        return f"{what}: nothing counted" + (f" ({cites})" if cites else "")
    found = "fired" if e.points_at is None else _POINTS_WORDS.get(e.points_at, "fired")
    return f"{what}: {found}: {cites}"


# ------------------------------------------------------------------------------ observations
def _replay_text(o: ReplayResult) -> str:
    r = o.replay
    if r.path == ReplayPath.FRESH_ENTRY:
        where = "on a fresh connection via the entry point"
    else:
        where = "directly to the router"
    if r.outcome == Outcome.OK:
        return f"same payload {where}: HTTP {r.status} in {round(r.elapsed_s, 3)} s"
    return f"same payload {where}: {r.outcome} after {round(r.elapsed_s, 3)} s ({r.detail})"


def _progress_text(o: EngineProgress) -> str:
    if not o.known:
        return f"{o.subject} ({o.role}) /metrics: UNKNOWN (did not answer; not healthy)"
    state = "moving" if o.healthy else "FROZEN"
    waiting = "" if o.in_transfer is None else f", waiting for KV {o.in_transfer:g}"
    return (
        f"{o.subject} ({o.role}) /metrics over {o.interval_s} s: running {o.running}, "
        f"queued {o.queued}{waiting}, +{o.generated_delta:g} tokens, "
        f"+{o.requests_delta:g} requests ({state})"
    )


def _failures_text(o: SignatureFailures) -> str:
    sig = o.signature.replace("_", " ")
    status = f"HTTP {o.status} " if o.status else ""
    return (
        f"{o.count} failure(s) of kind {sig}, first session {o.session} round {o.round}: "
        f"{status}{o.error} {one_line(o.detail)}".rstrip()
    )


def one_line(text: str, width: int = 80, mark: str = "") -> str:
    """``text`` on one line (an error page's newlines and runs of spaces folded), cut to
    ``width`` characters, the cut marked with ``mark`` (inside the width)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - len(mark)] + mark


def _cell_text(o: MatrixCell) -> str:
    c = o.cell
    mode = "streaming" if c.stream else "not streaming"
    hop = hop_title(c.hop)
    where = hop if c.target == "entry" else f"{hop} {c.target}"
    load = f" x{c.copies} at once" if c.copies > 1 else ""
    idle = f" after {c.idle_s:g} s idle" if c.idle_s else ""
    what = f"{c.payload} payload ({c.payload_bytes} B){load} {where}{idle}, {mode}"
    first = "" if c.first_event_s is None else f", first token {c.first_event_s:.2f} s"
    if c.ok:
        return f"{what}: HTTP {c.status} in {round(c.elapsed_s, 3)} s{first}"
    side = f" on the {c.side} side" if c.side else ""
    copies = f" ({c.failed_copies} of {c.copies})" if c.copies > 1 else ""
    return (
        f"{what}: {c.outcome}{copies}{side} after {round(c.elapsed_s, 3)} s "
        f"({one_line(c.detail)}){_answered_by(c.server, c.echoed_id)}"
    )


def _answered_by(server: str, echoed: bool | None) -> str:
    """Who answered, from the head: its ``Server`` header, and whether the request id came back."""
    if echoed is None:
        return ""
    named = f"Server: {server}, " if server else ""
    back = "the request id came back" if echoed else "no request id back"
    return f" [{named}{back}]"


def _resends_text(o: Resends) -> str:
    why = []
    if o.idle_s:
        idle = "/".join(f"{i:g}" for i in o.idle_s)
        why.append(f"the server had closed the kept-alive connection after {idle} s idle")
    if o.statuses:
        why.append("the client retried after HTTP " + "/".join(map(str, o.statuses)))
    return (
        f"{o.count} request(s) sent again by the client ({'; '.join(why)}): a plain client "
        "fails there"
    )


def _router_text(o: RouterHealth) -> str:
    if not o.known:
        return "router Prometheus metrics: UNKNOWN (did not answer; not healthy)"
    errors = ", ".join(f"{k or '?'} {v:g}" for k, v in o.errors.items()) or "none"
    ttft = "" if o.pd_ttft_s is None else f", PD TTFT mean {o.pd_ttft_s * 1000:.0f} ms"
    return (
        f"router metrics: {o.inflight_aged:g} request(s) in flight past 30 s, errors {errors}{ttft}"
    )


def describe_observation(o: Observation) -> str:
    """One sentence for an observation."""
    match o:
        case Stalls():
            return f"{o.count} request(s) stalled ({o.head} before any response byte)"
        case ReusedConnectionStalls():
            carried = "/".join(map(str, o.requests_carried))
            return (
                f"{o.count} stall(s) on reused keep-alive connections "
                f"(after {carried} request(s) on them)"
            )
        case FreshConnectionStalls():
            return f"{o.count} stall(s) on a connection's first request"
        case SignatureFailures():
            return _failures_text(o)
        case FrontAnswers():
            servers = ", ".join(o.servers) or "none"
            codes = "/".join(map(str, o.statuses))
            return (
                f"{o.count} failed answer(s) (HTTP {codes}) came without the request's id that "
                f"the router returns (Server: {servers}): a hop in front of the router answered"
            )
        case Resends():
            return _resends_text(o)
        case MatrixCell():
            return _cell_text(o)
        case MatrixBisection():
            return f"payload bisected: works at {o.ok_bytes} B, fails at {o.fail_bytes} B"
        case ReplayResult():
            return _replay_text(o)
        case ProbeResult():
            p = o.probe
            return f"{o.subject} {p.kind}: {p.detail or p.status}".rstrip()
        case EngineProgress():
            return _progress_text(o)
        case TransferFailures():
            return f"{o.subject}: {o.delta:g} KV transfer(s) failed"
        case RouterHealth():
            return _router_text(o)
        case OpenCircuit():
            return f"router: circuit breaker OPEN for {o.worker}"
        case UnhealthyWorker():
            return f"router: worker {o.worker} marked unhealthy"
        case LoadReading():
            load = "UNKNOWN" if o.load.load is None else f"{o.load.load:g}"
            return f"{o.subject} load ({o.load.source}): {load}"
        case EngineStart():
            return f"engines were {o.start.start} at start ({o.start.reason})"
        case CorrectnessViolations():
            first = o.examples[0].detail if o.examples else ""
            return f"{o.count} {o.issue.replace('_', ' ')} violation(s), e.g. {first}"
        case TelemetryReading():
            return telemetry_text(o.evidence)
        case PairMismatch():
            return describe_pair(o.pair)
        case _:
            assert_never(o)


# ---------------------------------------------------------------------------------- findings
@dataclass(frozen=True)
class EvidenceLine:
    """One line of a finding's evidence: its observation (None: the worker singled out),
    whether it supports the finding, and its sentence."""

    id: str
    supports: bool
    text: str
    observation: Observation | None = None


def finding_evidence(finding: Finding, observations: Sequence[Observation]) -> list[EvidenceLine]:
    """The worker singled out (if any), then each supporting and contradicting observation."""
    by_id = {o.id: o for o in observations}
    lines = [EvidenceLine("worker", True, f"worker: {finding.worker}")] if finding.worker else []
    for ids, supports in ((finding.supporting, True), (finding.contradicting, False)):
        lines += [
            EvidenceLine(i, supports, describe_observation(by_id[i]), by_id[i])
            for i in ids
            if i in by_id
        ]
    return lines


def dropped_text(d: Dropped) -> str:
    """Why a finding was left out: which finding explains it, and how."""
    worker = f" ({d.worker})" if d.worker else ""
    what = f"{layer_title(d.layer)}{worker}, confidence {d.confidence:.2f}"
    match d.reason:
        case DropReason.INNER_HOP_WORKED:
            why = "the same payload worked at the hops inside the one it located"
        case DropReason.ANSWERED_IN_FRONT:
            why = "the failed answers came from in front of the router"
        case _:
            assert_never(d.reason)
    return f"{what}: dropped, explained by {layer_title(d.by)} ({why}: {', '.join(d.because)})"
