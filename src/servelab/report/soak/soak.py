"""Words for soak results: the console summary, finding sentences, and the worded findings that
the ``--json`` document and the ledger carry. The document's shape is
:class:`servelab.core.ledger.results.SoakDocument`; :func:`servelab.ops.soak.record.soak_document`
fills its numbers, :func:`soak_record` its words.

The rules in :mod:`servelab.core.soak.diagnose` return data (layer, confidence, observation ids);
every sentence a person reads is written here. Nothing in this module does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servelab.core.ledger.results import SoakDocument, SoakFinding
from servelab.core.soak.diagnose import Finding, Observation
from servelab.ops.soak.record import soak_document
from servelab.ops.soak.soak import SoakResult
from servelab.report.soak.matrix import (
    describe_context,
    matrix_lines,
    start_line,
    undecided_lines,
)
from servelab.report.soak.traces import trace_lines

__all__ = [
    "LAYER_ADVICE",
    "LAYER_TITLES",
    "describe_observation",
    "render_soak",
    "soak_finding",
    "soak_record",
    "telemetry_lines",
    "telemetry_text",
]

LAYER_TITLES: dict[str, str] = {
    "client_proxy": "client / proxy layer (connection reuse, or the proxy itself)",
    "router": "router",
    "prefill": "prefill engine",
    "decode_transfer": "KV transfer / decode path",
    "engine_wedge": "engine wedged while its health says 200",
    "correctness": "correctness under load",
    "engine_saturation": "engine saturated (queueing), not a network fault",
    "client": "the client (the load generator, or what sits in front of the router)",
}

LAYER_ADVICE: dict[str, str] = {
    "client_proxy": (
        "The same payload succeeds on a fresh connection and directly at the router: look at "
        "the proxy or client between the agents and the router (keep-alive reuse) before "
        "touching the engines or their knobs."
    ),
    "router": (
        "Requests through the router fail while nothing reaches the engines, or the router "
        "reports unready workers: look at the router (readiness, worker registration, circuit "
        "breaker) first."
    ),
    "prefill": "The prefill engine is unhealthy or stuck: look at the prefill worker first.",
    "decode_transfer": (
        "Prefill keeps serving, but decode makes no progress and requests through the router "
        "hang while every health endpoint says 200: look at the KV transfer / decode path "
        "(bootstrap, WaitingForInput, abort handling)."
    ),
    "engine_wedge": (
        "An engine holds requests but produces no tokens while its /health says 200: "
        "the engine's scheduler is wedged."
    ),
    "correctness": (
        "Answers are wrong under load (tool-call arguments that are not JSON, or a greedy "
        "request whose text changes with concurrency)."
    ),
    "engine_saturation": (
        "The engine's waiting queue grew while the client's time to first token grew with it: "
        "the engine is saturated (add capacity or lower the load); the network is not at fault."
    ),
    "client": (
        "The client received a different number of output tokens than the decodes counted "
        "over the same window: the load generator (or a proxy in front of the router) is not "
        "seeing what the servers produced; fix the client before reading its numbers."
    ),
}

_RULE_WORDS = {
    "router_errors": "router counters",
    "engine_transfer": "KV transfer counters",
    "engine_saturation": "waiting queue and client TTFT",
    "client_vs_server": "client tokens against the decodes' count",
}
_POINTS_WORDS = {
    "workers": "the router counted its workers failing",
    "router": "the router refused requests itself",
    "decode_transfer": "KV transfers failed",
    "engine_saturation": "the queue and the client's TTFT rose together",
    "client": "the client and the decodes disagree",
}


def _cite_text(c: Mapping[str, Any]) -> str:
    value, kind = c["value"], c["kind"]
    if kind == "delta":
        return f"{c['series']} +{value:g}"
    if kind == "rise":
        return f"{c['series']} rose {value:g}"
    if kind == "last":
        return f"{c['series']} = {value:g} at the end"
    return f"{c['series']} {value:g}"


def telemetry_text(o: Observation) -> str:
    """One sentence for a run-telemetry observation (``telemetry.<rule>.<subject>``)."""
    d = o.data
    what = f"{o.subject} {_RULE_WORDS.get(d['rule'], d['rule'])} over the run"
    if d.get("unknown"):
        return f"{what}: UNKNOWN ({d.get('reason') or 'no answer'}; not healthy)"
    cites = "; ".join(_cite_text(c) for c in d.get("cites") or ())
    if o.healthy:
        return f"{what}: nothing counted" + (f" ({cites})" if cites else "")
    return f"{what}: {_POINTS_WORDS.get(d.get('points_at') or '', 'fired')}: {cites}"


def _stalls_text(d: Mapping[str, Any]) -> str:
    return f"{d['count']} request(s) stalled ({d.get('head', 0)} before any response byte)"


def _replay_text(o: Observation) -> str:
    d = o.data
    where = (
        "on a fresh connection via the entry point"
        if o.id.endswith("fresh_entry")
        else ("directly to the router")
    )
    if d["outcome"] == "ok":
        return f"same payload {where}: HTTP {d['status']} in {d['elapsed_s']} s"
    return f"same payload {where}: {d['outcome']} after {d['elapsed_s']} s ({d['detail']})"


def _metrics_text(o: Observation) -> str:
    d = o.data
    state = "moving" if o.healthy else "FROZEN"
    waiting = "" if d.get("in_transfer") is None else f", waiting for KV {d['in_transfer']:g}"
    return (
        f"{o.subject} ({d['role']}) /metrics over {d['interval_s']} s: running {d['running']}, "
        f"queued {d['queued']}{waiting}, +{d['generated_delta']:g} tokens, "
        f"+{d['requests_delta']:g} requests ({state})"
    )


def describe_observation(o: Observation) -> str:
    """One sentence for an observation."""
    d = o.data
    if o.id == "stalls":
        return _stalls_text(d)
    if o.id == "stalls.reused_connection":
        return (
            f"{d['count']} stall(s) on reused keep-alive connections "
            f"(after {'/'.join(map(str, d['requests_carried']))} request(s) on them)"
        )
    if o.id == "stalls.fresh_connection":
        return f"{d['count']} stall(s) on a connection's first request"
    if o.id.startswith("replay."):
        return _replay_text(o)
    if o.id.startswith("probe."):
        return f"{o.subject} {d['kind']}: {d['detail'] or d['status']}".rstrip()
    if o.id.endswith(".transfer_failed"):
        return f"{o.subject}: {d['delta']:g} KV transfer(s) failed"
    if o.id.endswith(".progress"):
        if d.get("unknown"):
            return f"{o.subject} ({d['role']}) /metrics: UNKNOWN (did not answer; not healthy)"
        return _metrics_text(o)
    if o.id.startswith("telemetry."):
        return telemetry_text(o)
    context = describe_context(o)
    if context is not None:
        return context
    if o.id.startswith("correctness."):
        first = d["examples"][0]["detail"] if d.get("examples") else ""
        kind = o.id.split(".", 1)[1].replace("_", " ")
        return f"{d['count']} {kind} violation(s), e.g. {first}"
    return f"{o.id}: {dict(d)}"


def soak_finding(finding: Finding, obs: list[Observation]) -> SoakFinding:
    """A finding worded: layer, confidence, title, advice, and each piece of evidence."""
    by_id = {o.id: o for o in obs}
    evidence = [
        {"id": i, "supports": supports, "text": describe_observation(by_id[i])}
        | {"data": dict(by_id[i].data)}
        for ids, supports in ((finding.supporting, True), (finding.contradicting, False))
        for i in ids
        if i in by_id
    ]
    worker = [
        {
            "id": "worker",
            "supports": True,
            "text": f"worker: {finding.worker}",
            "data": {"worker": finding.worker},
        }
    ]
    return SoakFinding(
        layer=finding.layer,
        confidence=finding.confidence,
        title=LAYER_TITLES.get(finding.layer, finding.layer),
        advice=LAYER_ADVICE.get(finding.layer, ""),
        evidence=tuple((worker if finding.worker else []) + evidence),
        worker=finding.worker,
    )


def soak_record(result: SoakResult) -> SoakDocument:
    """The ``servelab soak --json`` document (also what the ledger records), findings worded."""
    return soak_document(result, [soak_finding(f, result.observations) for f in result.findings])


def _header(result: SoakResult) -> list[str]:
    data = soak_record(result).sessions
    cfg = result.config
    verdict = "OK" if result.ok else "PROBLEMS FOUND"
    lines = [
        f"soak {verdict}: {data.count} sessions x {cfg.rounds} rounds "
        f"({cfg.connection} connections) via {result.targets.entry_url}, "
        f"{result.elapsed_s:.1f} s",
        f"  sessions completed {data.completed}/{data.count}, "
        f"rounds done {data.rounds_done}, requests {data.requests}",
    ]
    if result.deadline_hit:
        lines.append(f"  the {cfg.duration_s:g} s deadline ended the soak (partial results)")
    if result.interrupted:
        lines.append("  interrupted (partial results)")
    return lines


def _stall_lines(result: SoakResult) -> list[str]:
    lines = [f"stalls ({len(result.stalls)}), idle timeout {result.config.idle_timeout_s:g} s:"]
    for s in result.stalls[:10]:
        who = f"session {s.session} round {s.round}" if s.session >= 0 else "C1 probe"
        lines.append(
            f"  {who}: {s.payload_bytes} B payload, connection "
            f"age {s.connection_age_s:.1f} s after {s.connection_requests} request(s), "
            f"received {s.received_bytes} B / {s.received_events} events ({s.phase})"
        )
    if len(result.stalls) > 10:
        lines.append(f"  ... {len(result.stalls) - 10} more")
    return lines


def _finding_lines(rank: int, finding: Finding, obs: list[Observation]) -> list[str]:
    data = soak_finding(finding, obs)
    worker = f", worker {finding.worker}" if finding.worker else ""
    lines = [
        f"{rank}. {data.title}{worker} (confidence {finding.confidence:.2f})",
        f"   {data.advice}",
    ]
    for item in data.evidence:
        mark = "+" if item["supports"] else "-"
        lines.append(f"   {mark} {item['text']}")
    return lines


def telemetry_lines(result: SoakResult) -> list[str]:
    """The run-telemetry rules that fired, and those whose source did not answer (quiet ones,
    and those with too little to judge, are in the JSON only)."""
    if result.telemetry is None:
        return []
    silent = set(result.telemetry.unknown)
    told = [
        o
        for o in result.observations
        if o.id.startswith("telemetry.")
        and (o.healthy is False or (o.healthy is None and o.subject in silent))
    ]
    if not told:
        return []
    return ["run telemetry (router and engine metrics over the soak):"] + [
        f"  {'?' if o.healthy is None else '!'} {telemetry_text(o)}" for o in told
    ]


def render_soak(result: SoakResult) -> str:
    """The console summary: header, start, stalls, errors, matrices, findings (most likely
    first), or why there is none."""
    lines = _header(result)
    if result.start is not None:
        lines.append(start_line(result.start))
    if result.stalls:
        lines += _stall_lines(result)
    if result.errors:
        lines.append(f"failed requests ({len(result.errors)}):")
        lines += [f"  session {e.session} round {e.round}: {e.error}" for e in result.errors[:10]]
    lines += trace_lines(result)
    for loc in result.localizations:
        lines += matrix_lines(loc)
    lines += telemetry_lines(result)
    if result.findings:
        lines.append("findings (most likely first; + supports, - contradicts):")
        for rank, finding in enumerate(result.findings, 1):
            lines += _finding_lines(rank, finding, result.observations)
    elif result.undecided is not None:
        lines += undecided_lines(result.undecided)
    elif result.stalls:
        lines.append("no layer could be singled out from the evidence gathered")
    elif result.errors:
        lines.append("no stall to localize; the failed requests above say what went wrong")
    else:
        lines.append("no finding")
    return "\n".join(lines) + "\n"
