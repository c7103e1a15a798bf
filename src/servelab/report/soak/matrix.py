"""Words for the localization: the replay matrix table, what the matrix located, the engines'
start, and why there is no finding. Nothing here does I/O."""

from __future__ import annotations

from typing import assert_never

from servelab.core.soak.clock import Clock
from servelab.core.soak.evidence import Localization
from servelab.core.soak.replay import Cell, Dependence, Reason
from servelab.core.soak.undecided import NextProbe, Undecided, UndecidedReason
from servelab.core.verify.coldstart import StartClass
from servelab.report.soak.words import hop_title, one_line

__all__ = [
    "dependence_text",
    "located_text",
    "matrix_lines",
    "probe_advice",
    "start_line",
    "undecided_lines",
    "undecided_text",
]


def located_text(reason: Reason) -> str:
    """What the matrix's reading means."""
    match reason:
        case Reason.ENGINE_PAIR:
            return "the pair fails the payload straight, without the router"
        case Reason.ROUTER:
            return "every pair answers it straight; the router fails it"
        case Reason.PROXY:
            return "the router answers it; the entry point fails it on a fresh connection"
        case Reason.CONNECTION_REUSE:
            return "a fresh connection gets it through; a reused one fails it"
        case Reason.NOT_REPRODUCED:
            return "every hop answered the failing payload (not reproduced)"
        case Reason.NO_PAIR_REPLAY:
            return "the router fails it, and no pair could be replayed straight"
        case Reason.HELD:
            return "every hop answers it; this one holds the stream the hop inside it streams"
        case _:
            assert_never(reason)


def dependence_text(dep: Dependence | None, load: int | None) -> str:
    """What a located failure depends on (by the probes that vary one thing), or ""."""
    match dep:
        case None:
            return ""
        case Dependence.SIZE:
            return "it depends on the prompt's size (a small prompt, same answer length, passes)"
        case Dependence.LENGTH:
            return "it depends on the answer's length (the same prompt, a short answer, passes)"
        case Dependence.SIZE_AND_LENGTH:
            return "a small prompt passes, and so does a short answer"
        case Dependence.NEITHER:
            return "it fails with a small prompt and with a short answer too"
        case Dependence.LOAD:
            return f"alone, or after a pause, it passes; at {load} in flight it fails (load)"
        case _:
            assert_never(dep)


def undecided_text(reason: UndecidedReason) -> str:
    """Why failures gave no finding."""
    match reason:
        case UndecidedReason.NOT_REPRODUCED:
            return "the failure did not reproduce: every replay of its payload worked"
        case UndecidedReason.COLD:
            return (
                "the engines were cold when the soak began and the failure did not reproduce "
                "once warm"
            )
        case UndecidedReason.NOT_LOCALIZED:
            return "no localization ran (turned off, over budget, or out of time)"
        case UndecidedReason.NO_PAIR:
            return (
                "the router fails the payload but no prefill/decode pair could be replayed straight"
            )
        case UndecidedReason.CONFLICT:
            return "the observations point different ways and no rule's gate holds"
        case _:
            assert_never(reason)


def probe_advice(probe: NextProbe) -> str:
    """What to do next to tell the suspects apart."""
    match probe:
        case NextProbe.REPLAY_UNDER_LOAD:
            return (
                "soak longer or with more sessions, so the failure happens again while it is "
                "replayed"
            )
        case NextProbe.SOAK_AGAIN:
            return (
                "it passed replayed alone and at the load it met: soak again (longer) to see "
                "whether it recurs, and with --client naive to see failures a client masks"
            )
        case NextProbe.SOAK_WARM:
            return "soak again now that the engines are warm"
        case NextProbe.LOCALIZE:
            return "soak again with localization on and a --duration that leaves time for it"
        case NextProbe.PAIR_REPLAY:
            return (
                "declare each prefill's bootstrap_port (or let the router list it) so the pairs "
                "can be replayed without the router"
            )
        case NextProbe.SCRAPE:
            return "make the unknown sources answer (the router's metrics port, engine /metrics)"
        case _:
            assert_never(probe)


def _clock(c: Cell) -> str:
    """What judged a non-streamed cell (a stream's clock, the idle timeout, goes unsaid)."""
    match c.clock:
        case Clock.DEADLINE:
            return f" [deadline {c.deadline_s:g} s from its expected answer]"
        case Clock.ANSWER:
            return " [no deadline known]"
        case _:
            return ""


def _state(c: Cell) -> str:
    if c.undecided:
        return (
            f"UNDECIDED after {c.elapsed_s:.2f} s: not streamed and no deadline known "
            "(no stream measured the decode rate): evidence of nothing"
        )
    if c.ok:
        head = "" if c.first_byte_s is None else f", head {c.first_byte_s:.2f} s"
        first = "" if c.first_event_s is None else f", token {c.first_event_s:.2f} s"
        copies = f" (x{c.copies})" if c.copies > 1 else ""
        return f"ok {c.status} in {c.elapsed_s:.2f} s{head}{first}{copies}{_clock(c)}"
    side = f" ({c.side} side)" if c.side else ""
    copies = f" {c.failed_copies} of {c.copies}" if c.copies > 1 else ""
    detail = one_line(c.detail, 60, "…")
    return f"{c.outcome.upper()}{copies}{side} after {c.elapsed_s:.2f} s{_clock(c)}: {detail}"


def matrix_lines(loc: Localization) -> list[str]:
    """The matrix as a table: one row per cell, the located layer (and worker), the bisection."""
    m = loc.matrix
    f = loc.failure
    lines = [
        f"replay matrix for {f.signature} (session {f.session} round {f.round}, "
        f"{f.payload_bytes} B, {f.connection_requests} request(s) on its connection), "
        f"{m.elapsed_s:.1f} s:",
        f"  {'hop':<26} {'target':<22} {'payload':<12} {'mode':<6} result",
    ]
    for c in m.cells:
        mode = "stream" if c.stream else "plain"
        hop = hop_title(c.hop) + (f" ({c.idle_s:g} s idle)" if c.idle_s else "")
        lines.append(f"  {hop:<26} {c.target:<22} {c.payload:<12} {mode:<6} {_state(c)}")
    b = m.bisection
    if b is not None:
        lines.append(
            f"  bisected {hop_title(b.hop)} {b.target}: works at {b.ok_bytes} B, "
            f"fails at {b.fail_bytes} B ({len(b.steps)} step(s))"
        )
    where = m.located
    layer = f" -> {where.layer}" if where.layer else ""
    worker = f" (worker {where.worker})" if where.worker else ""
    lines.append(f"  located: {located_text(where.reason)}{layer}{worker}")
    depends = dependence_text(where.dependence, where.load)
    if depends:
        lines.append(f"  {depends}")
    if where.conflicting:
        lines.append("  not explained by it: " + ", ".join(where.conflicting))
    return lines


def start_line(start: StartClass) -> str:
    if start.second_s is None or start.first_s is None:  # the counter told: no request sent
        served = "" if start.served_before is None else f", {start.served_before} served before"
        return f"engines at start: {start.start} ({start.reason}{served})"
    took = f"first request {start.first_s:.2f} s, then {start.second_s:.2f} s"
    return f"engines at start: {start.start} ({start.reason}, {took}); warmed before measuring"


def undecided_lines(why: Undecided) -> list[str]:
    lines = [f"no finding: {undecided_text(why.reason)}"]
    if why.conflicting:
        lines.append("  conflicting: " + ", ".join(why.conflicting[:8]))
    if why.unknown:
        lines.append("  unknown (no answer, not healthy): " + ", ".join(why.unknown))
    lines.append(f"  next probe: {probe_advice(why.probe)}")
    return lines
