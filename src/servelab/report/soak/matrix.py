"""Words for the localization: the replay matrix table, the failures, the router's own metrics,
the loads, the engines' start, and why there is no finding. Nothing here does I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servelab.core.soak.diagnose import (
    PROBE_LOCALIZE,
    PROBE_PAIR_REPLAY,
    PROBE_REPLAY_UNDER_LOAD,
    PROBE_SCRAPE,
    PROBE_SOAK_WARM,
    UNDECIDED_COLD,
    UNDECIDED_CONFLICT,
    UNDECIDED_NO_PAIR,
    UNDECIDED_NOT_LOCALIZED,
    UNDECIDED_NOT_REPRODUCED,
    Observation,
    Undecided,
)
from servelab.core.soak.observe import Localization
from servelab.core.soak.replay import (
    HOP_FRESH,
    HOP_PAIR,
    HOP_REUSED,
    HOP_ROUTER,
    REASON_CONNECTION_REUSE,
    REASON_ENGINE_PAIR,
    REASON_NO_PAIR_REPLAY,
    REASON_NOT_REPRODUCED,
    REASON_PROXY,
    REASON_ROUTER,
    Cell,
)
from servelab.core.verify.coldstart import StartClass

__all__ = [
    "HOP_TITLES",
    "PROBE_ADVICE",
    "describe_context",
    "matrix_lines",
    "start_line",
    "undecided_lines",
]

HOP_TITLES = {
    HOP_PAIR: "straight to the pair",
    HOP_ROUTER: "straight to the router",
    HOP_FRESH: "entry, fresh connection",
    HOP_REUSED: "entry, reused connection",
}

_LOCATED = {
    REASON_ENGINE_PAIR: "the pair fails the payload straight, without the router",
    REASON_ROUTER: "every pair answers it straight; the router fails it",
    REASON_PROXY: "the router answers it; the entry point fails it on a fresh connection",
    REASON_CONNECTION_REUSE: "a fresh connection gets it through; a reused one fails it",
    REASON_NOT_REPRODUCED: "every hop answered the failing payload (not reproduced)",
    REASON_NO_PAIR_REPLAY: "the router fails it, and no pair could be replayed straight",
}

_UNDECIDED = {
    UNDECIDED_NOT_REPRODUCED: "the failure did not reproduce: every replay of its payload worked",
    UNDECIDED_COLD: (
        "the engines were cold when the soak began and the failure did not reproduce once warm"
    ),
    UNDECIDED_NOT_LOCALIZED: "no localization ran (turned off, over budget, or out of time)",
    UNDECIDED_NO_PAIR: (
        "the router fails the payload but no prefill/decode pair could be replayed straight"
    ),
    UNDECIDED_CONFLICT: "the observations point different ways and no rule's gate holds",
}

PROBE_ADVICE = {
    PROBE_REPLAY_UNDER_LOAD: (
        "soak longer or with more sessions, so the failure happens again while it is replayed"
    ),
    PROBE_SOAK_WARM: "soak again now that the engines are warm",
    PROBE_LOCALIZE: "soak again with localization on and a --duration that leaves time for it",
    PROBE_PAIR_REPLAY: (
        "declare each prefill's bootstrap_port (or let the router list it) so the pairs can be "
        "replayed without the router"
    ),
    PROBE_SCRAPE: "make the unknown sources answer (the router's metrics port, engine /metrics)",
}


def _state(cell: Mapping[str, Any] | Cell) -> str:
    c = cell if isinstance(cell, Cell) else None
    if c is None:
        return ""
    if c.ok:
        head = "" if c.first_byte_s is None else f", head {c.first_byte_s:.2f} s"
        return f"ok {c.status} in {c.elapsed_s:.2f} s{head}"
    side = f" ({c.side} side)" if c.side else ""
    detail = c.detail if len(c.detail) <= 60 else c.detail[:59] + "…"
    return f"{c.outcome.upper()}{side} after {c.elapsed_s:.2f} s: {detail}"


def matrix_lines(loc: Localization) -> list[str]:
    """The matrix as a table: one row per cell, the located layer (and worker), the bisection."""
    m = loc.matrix
    f = loc.failure
    lines = [
        f"replay matrix for {f.signature} (session {f.session} round {f.round}, "
        f"{f.payload_bytes} B, {f.connection_requests} request(s) on its connection), "
        f"{m.elapsed_s:.1f} s:",
        f"  {'hop':<26} {'target':<22} {'payload':<9} {'mode':<6} result",
    ]
    for c in m.cells:
        mode = "stream" if c.stream else "plain"
        hop = HOP_TITLES.get(c.hop, c.hop)
        lines.append(f"  {hop:<26} {c.target:<22} {c.payload:<9} {mode:<6} {_state(c)}")
    b = m.bisection
    if b is not None:
        lines.append(
            f"  bisected {HOP_TITLES.get(b.hop, b.hop)} {b.target}: works at {b.ok_bytes} B, "
            f"fails at {b.fail_bytes} B ({len(b.steps)} step(s))"
        )
    where = m.located
    verdict = _LOCATED.get(where.reason, where.reason)
    layer = f" -> {where.layer}" if where.layer else ""
    worker = f" (worker {where.worker})" if where.worker else ""
    size = ", only with the larger payload" if where.size_dependent else ""
    lines.append(f"  located: {verdict}{size}{layer}{worker}")
    return lines


def start_line(start: StartClass) -> str:
    if start.second_s is None or start.first_s is None:  # the counter told: no request sent
        served = "" if start.served_before is None else f", {start.served_before} served before"
        return f"engines at start: {start.start} ({start.reason}{served})"
    took = f"first request {start.first_s:.2f} s, then {start.second_s:.2f} s"
    return f"engines at start: {start.start} ({start.reason}, {took}); warmed before measuring"


def undecided_lines(why: Undecided) -> list[str]:
    lines = [f"no finding: {_UNDECIDED.get(why.reason, why.reason)}"]
    if why.conflicting:
        lines.append("  conflicting: " + ", ".join(why.conflicting[:8]))
    if why.unknown:
        lines.append("  unknown (no answer, not healthy): " + ", ".join(why.unknown))
    lines.append(f"  next probe: {PROBE_ADVICE.get(why.probe, why.probe)}")
    return lines


def _failure_text(o: Observation) -> str:
    d = o.data
    sig = o.id.split(".", 1)[1].replace("_", " ")
    status = f"HTTP {d['status']} " if d.get("status") else ""
    return (
        f"{d['count']} failure(s) of kind {sig}, first session {d['session']} round "
        f"{d['round']}: {status}{d.get('error', '')} {d.get('detail', '')[:80]}".rstrip()
    )


def _matrix_text(o: Observation) -> str:
    d = o.data
    if o.id == "matrix.bisect":
        return f"payload bisected: works at {d['ok_bytes']} B, fails at {d['fail_bytes']} B"
    mode = "streaming" if d["stream"] else "not streaming"
    hop = HOP_TITLES.get(d["hop"], d["hop"])
    where = hop if d["target"] == "entry" else f"{hop} {d['target']}"
    what = f"{d['payload']} payload ({d['payload_bytes']} B) {where}, {mode}"
    if d["outcome"] == "ok":
        return f"{what}: HTTP {d['status']} in {d['elapsed_s']} s"
    side = f" on the {d['side']} side" if d.get("side") else ""
    return f"{what}: {d['outcome']}{side} after {d['elapsed_s']} s ({d['detail'][:80]})"


def _router_text(o: Observation) -> str:
    d = o.data
    if o.id == "router_metrics":
        if d.get("unknown"):
            return "router Prometheus metrics: UNKNOWN (did not answer; not healthy)"
        errors = ", ".join(f"{k or '?'} {v:g}" for k, v in d["errors"].items()) or "none"
        aged = f"{d['inflight_aged']:g} request(s) in flight past 30 s"
        return f"router metrics: {aged}, errors {errors}"
    if ".cb_open." in o.id:
        return f"router: circuit breaker OPEN for {d['worker']}"
    return f"router: worker {d['worker']} marked unhealthy"


def describe_context(o: Observation) -> str | None:
    """A sentence for the localization's own observations (None: not one of them)."""
    d = o.data
    if o.id.startswith("failure."):
        return _failure_text(o)
    if o.id.startswith("matrix."):
        return _matrix_text(o)
    if o.id.startswith("router_metrics"):
        return _router_text(o)
    if o.id.startswith("load."):
        load = "UNKNOWN" if d["load"] is None else f"{d['load']:g}"
        return f"{o.subject} load ({d['source']}): {load}"
    if o.id == "engines.start":
        return f"engines were {d['start']} at start ({d['reason']})"
    return None
