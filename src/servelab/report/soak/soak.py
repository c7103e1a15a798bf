"""A soak's result for people: the console summary, and the ``soak --json`` document with its
findings worded (pure; returns str, or the document's JSON-ready values for the ledger export).

The result (:class:`~servelab.core.soak.result.SoakResult`) holds codes, ids and numbers; the
sentences are :mod:`servelab.report.soak.words`. Both renderings work from a live result and from
a ledger row's alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.ledger.codec import Omitted, encode
from servelab.core.load.cache import merged
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.soak.conviction import Exoneration
from servelab.core.soak.finding import Dropped, Finding
from servelab.core.soak.observation import Observation
from servelab.core.soak.result import SoakClient, SoakResult, SoakTraces, Targets
from servelab.core.telemetry.rules import TelemetryReading
from servelab.core.telemetry.traces import RequestPhases
from servelab.report.document import Worded, document_text
from servelab.report.route import route_text
from servelab.report.slo import cache_text, slo_rows
from servelab.report.soak.conviction import exonerated_text
from servelab.report.soak.creep import CREEP_ADVICE, only_creep
from servelab.report.soak.matrix import matrix_lines, start_line, undecided_lines
from servelab.report.soak.traces import trace_lines
from servelab.report.soak.words import (
    dropped_text,
    finding_evidence,
    layer_advice,
    layer_title,
    one_line,
    telemetry_text,
)
from servelab.report.soak.workload import fresh_text, uncached_text
from servelab.report.text import url_text

__all__ = ["EvidenceDocument", "FindingWords", "Ok", "PhaseWords", "SoakWords", "TargetsWords",
           "Text", "TracesWords", "Worker", "cache_lines", "finding_advice", "page_sections",
           "render_soak", "slo_lines", "soak_document", "soak_json", "telemetry_lines"]  # fmt: skip

#: Sessions listed one by one in the console (more are summed up).
_LISTED_SESSIONS = 8


# ---------------------------------------------------------------------------------------- JSON
@dataclass(frozen=True)
class Worker:
    """The evidence line of the worker a finding singles out (its ``data``)."""

    worker: str | None


@dataclass(frozen=True)
class EvidenceDocument:
    """One piece of a finding's evidence: its id, whether it supports the finding, its sentence,
    and the observation itself (or the worker singled out) as ``data``."""

    id: str
    supports: bool
    text: str
    data: Worded[object, None]


@dataclass(frozen=True)
class FindingWords:
    """A finding's words: its layer's title, the advice, and its evidence."""

    title: str
    advice: str
    evidence: list[EvidenceDocument]


@dataclass(frozen=True)
class Text:
    """A sentence beside a dropped finding, an exonerated layer or the route."""

    text: str


@dataclass(frozen=True)
class PhaseWords:
    """A traced request's last phase reached and the first that never ended."""

    last: str | None
    first_missing: str | None


@dataclass(frozen=True)
class TracesWords:
    requests: list[Worded[RequestPhases, PhaseWords]]


@dataclass(frozen=True)
class TargetsWords:
    route: Worded[ProxyRoute, Text]


@dataclass(frozen=True)
class Ok:
    ok: bool


@dataclass(frozen=True)
class SoakWords:
    """``soak --json``'s words, each in place of the result's own key."""

    findings: list[Worded[Finding, FindingWords]]
    dropped: list[Worded[Dropped, Text]]
    exonerated: list[Worded[Exoneration, Text]]
    targets: Worded[Targets, TargetsWords]
    traces: Omitted[Worded[SoakTraces, TracesWords]] = None


def _finding(
    finding: Finding, observations: Sequence[Observation]
) -> Worded[Finding, FindingWords]:
    """A finding's codes with its words: title, advice, and each piece of evidence (its id,
    whether it supports the finding, its sentence, and the observation itself as ``data``)."""
    evidence = [
        EvidenceDocument(
            line.id,
            line.supports,
            line.text,
            Worded(Worker(finding.worker) if line.observation is None else line.observation),
        )
        for line in finding_evidence(finding, observations)
    ]
    words = FindingWords(layer_title(finding.layer), finding_advice(finding), evidence)
    return Worded(finding, words)


def finding_advice(finding: Finding) -> str:
    """The advice for ``finding``: the creep's when decay alone shows it, else its layer's."""
    return CREEP_ADVICE if only_creep(finding) else layer_advice(finding.layer)


def soak_json(result: SoakResult) -> str:
    """``servelab soak --json``: the result as the ledger stores it, plus ``ok``, each finding
    worded, and each traced request's ``last`` and ``first_missing`` phases (``traces`` only
    when traced)."""
    return document_text(_document(result))


def soak_document(result: SoakResult) -> object:
    """:func:`soak_json`'s document as JSON-ready values, for the ledger export to embed as each
    soak run's ``result`` (opaque to the caller, which embeds it as it is)."""
    document: object = encode(_document(result))
    return document


def _document(result: SoakResult) -> Worded[SoakResult, SoakWords]:
    route = result.targets.route
    traces = result.traces
    words = SoakWords(
        [_finding(f, result.observations) for f in result.findings],
        [Worded(d, Text(dropped_text(d))) for d in result.dropped],
        [Worded(e, Text(exonerated_text(e))) for e in result.exonerated],
        Worded(result.targets, TargetsWords(Worded(route, Text(route_text(route))))),
        None if traces is None else Worded(traces, TracesWords([
            Worded(p, PhaseWords(p.last, p.first_missing)) for p in traces.requests
        ])),
    )  # fmt: skip
    return Worded(result, words, head=Ok(result.ok), omit=() if traces else ("traces",))


# ------------------------------------------------------------------------------------- console
def _header(result: SoakResult) -> list[str]:
    data = result.sessions
    cfg = result.config
    verdict = "OK" if result.ok else "PROBLEMS FOUND"
    client = "" if cfg.client == SoakClient.SERVELAB else f", {cfg.client} client"
    opened = sum(s.connections for s in data.per_session)
    conns = f", connections opened {opened}" if opened else ""
    lines = [
        f"soak {verdict}: {data.count} sessions x {cfg.rounds} rounds "
        f"({cfg.connection} connections{client}) via {url_text(result.targets.entry_url)}, "
        f"{result.elapsed_s:.1f} s",
        f"  sessions completed {data.completed}/{data.count}, "
        f"rounds done {data.rounds_done}, requests {data.requests}{conns}",
        f"  path: {route_text(result.targets.route)}",
    ]
    if result.deadline_hit:
        lines.append(f"  the {cfg.duration_s:g} s deadline ended the soak (partial results)")
    if result.interrupted:
        lines.append("  interrupted (partial results)")
    return lines


def _rate(hit: float | None) -> str:
    return "unknown" if hit is None else f"{hit * 100:.1f}%"


def cache_lines(result: SoakResult) -> list[str]:
    """What the prefix cache served the sessions: over every round and from round 2 on (the
    rounds that resend a history), then each session's (the first few)."""
    per = result.sessions.per_session
    if not per:
        return []
    every, warm = merged(s.cache for s in per), merged(s.warm for s in per)
    lines = [f"  prefix cache hit rate: {cache_text(every)}; from round 2: {_rate(warm.hit_rate)}"]
    lines += [f"  {fresh_text(result.config.fresh_context)}; {uncached_text(result.uncached)}"]
    if every.hit_rate is None:
        return lines
    for s in per[:_LISTED_SESSIONS]:
        lines.append(f"    session {s.session}: {_rate(s.cache.hit_rate)} over {s.requests} "
                     f"request(s), {_rate(s.warm.hit_rate)} from round 2")  # fmt: skip
    if len(per) > _LISTED_SESSIONS:
        lines.append(f"    ... {len(per) - _LISTED_SESSIONS} more sessions")
    return lines


def slo_lines(result: SoakResult) -> list[str]:
    """The sessions' requests against the SLO, one line per objective and the attainment."""
    if result.slo is None:
        return []
    return [f"  {name}: {text}" for name, text in slo_rows(result.slo)]


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


def _resend_lines(result: SoakResult) -> list[str]:
    """Every request the client sent again (the failures it masked)."""
    if not result.resends:
        return []
    lines = [f"requests sent again ({len(result.resends)}; a plain client fails these):"]
    for r in result.resends[:10]:
        if r.status is not None:
            why = f"the client retried after HTTP {r.status}"
        else:
            when = "found closed before the send" if r.before_send else "closed before the answer"
            why = f"the kept-alive connection, idle {r.idle_s:g} s, was {when}"
        lines.append(f"  session {r.session} round {r.round}: {why}")
    if len(result.resends) > 10:
        lines.append(f"  ... {len(result.resends) - 10} more")
    return lines


def _finding_lines(rank: int, finding: Finding, observations: Sequence[Observation]) -> list[str]:
    """A finding as the console shows it: rank, title, worker, confidence, advice, and each
    piece of evidence (``+`` supports, ``-`` contradicts)."""
    worker = f", worker {finding.worker}" if finding.worker else ""
    lines = [
        f"{rank}. {layer_title(finding.layer)}{worker} (confidence {finding.confidence:.2f})",
        f"   {finding_advice(finding)}",
    ]
    for line in finding_evidence(finding, observations):
        lines.append(f"   {'+' if line.supports else '-'} {line.text}")
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
        if isinstance(o, TelemetryReading)
        and (o.healthy is False or (o.healthy is None and o.subject in silent))
    ]
    if not told:
        return []
    return ["run telemetry (router and engine metrics over the soak):"] + [
        f"  {'?' if o.healthy is None else '!'} {telemetry_text(o.evidence)}" for o in told
    ]


def render_soak(result: SoakResult) -> str:
    """The console summary: header, start, stalls, errors, matrices, findings (most likely
    first), or why there is none."""
    lines = [*_header(result), *cache_lines(result), *slo_lines(result)]
    if result.start is not None:
        lines.append(start_line(result.start))
    if result.stalls:
        lines += _stall_lines(result)
    if result.errors:
        lines.append(f"failed requests ({len(result.errors)}):")
        lines += [
            f"  session {e.session} round {e.round}: {e.error}: {one_line(e.detail, 70, '…')}"
            for e in result.errors[:10]
        ]
    lines += _resend_lines(result)
    lines += trace_lines(result)
    for loc in result.localizations:
        lines += matrix_lines(loc)
    lines += telemetry_lines(result)
    if result.findings:
        lines.append("findings (most likely first; + supports, - contradicts):")
        for rank, finding in enumerate(result.findings, 1):
            lines += _finding_lines(rank, finding, result.observations)
        lines += [f"  {dropped_text(d)}" for d in result.dropped]
    elif result.undecided is not None:
        lines += undecided_lines(result.undecided)
    elif result.stalls:
        lines.append("no layer could be singled out from the evidence gathered")
    elif result.errors:
        lines.append("no stall to localize; the failed requests above say what went wrong")
    else:
        lines.append("no finding")
    if result.exonerated:
        lines.append("exonerated (not findings, by the conviction rule):")
        lines += [f"  {exonerated_text(e)}" for e in result.exonerated]
    return "\n".join(lines) + "\n"


def page_sections(result: SoakResult) -> list[str]:
    """The markdown a soak's report page shows whatever it found: the prefix cache's hit rate,
    the SLO's verdicts, its failures (one line each), the requests its client sent again, each
    replay matrix with its located reason, the findings dropped as explained by a stronger one,
    and, without a finding, why and what to probe next."""
    sessions = result.sessions.per_session
    every, warm = merged(x.cache for x in sessions), merged(x.warm for x in sessions)
    out = [f"Prefix cache hit rate: {cache_text(every)}; from round 2: "
           f"{cache_text(warm) if warm.hit_rate is not None else 'unknown'}.", "",
           f"{fresh_text(result.config.fresh_context).capitalize()}; "
           f"{uncached_text(result.uncached)}.", ""]  # fmt: skip
    if result.slo is not None:
        out += ["| SLO | verdict |", "|---|---|"]
        out += [f"| {k} | {v} |" for k, v in slo_rows(result.slo)] + [""]
    failed = [
        f"- session {f.session} round {f.round}: {f.signature}"
        + (f" (HTTP {f.status})" if f.status else "")
        + (f": {one_line(f.detail, 100, '…')}" if f.detail else "")
        for f in result.failures
    ]
    if failed:
        out += [f"Failures ({len(failed)}):", "", *failed[:20], ""]
    resent = _resend_lines(result)
    if resent:
        out += [resent[0], "", *(f"- {line.strip()}" for line in resent[1:]), ""]
    for loc in result.localizations:
        lines = matrix_lines(loc)
        out += [f"### {lines[0].rstrip(':')}", "", "```", *lines[1:], "```", ""]
    if result.dropped:
        out += ["Dropped findings:", "", *(f"- {dropped_text(d)}" for d in result.dropped), ""]
    if result.exonerated:
        cleared = (f"- {exonerated_text(e)}" for e in result.exonerated)
        out += ["Exonerated (not findings):", "", *cleared, ""]
    if not result.findings and result.undecided is not None:
        why = undecided_lines(result.undecided)
        out += [why[0][0].upper() + why[0][1:] + ".", "", *(f"- {w.strip()}" for w in why[1:]), ""]
    elif not result.findings:
        out += ["No finding." if result.localized or not failed else "No localization ran.", ""]
    return out
