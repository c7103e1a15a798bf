"""The creep rule's words: a creeping source's reading, and the advice for a finding that only
decay shows (pure; the rule is :mod:`servelab.core.soak.creep`; ``report.soak.words`` words the
reading through :func:`creep_text`, ``report.soak.soak`` gives :data:`CREEP_ADVICE`)."""

from __future__ import annotations

from servelab.core.soak.creep import RULE_CREEP
from servelab.core.soak.finding import Finding
from servelab.core.telemetry.rules import QUIET, UNKNOWN, Cite, TelemetryEvidence

__all__ = ["CREEP_ADVICE", "creep_text", "only_creep"]

#: What to look at when a layer's gauges creep and nothing else was found there.
CREEP_ADVICE = (
    "Nothing failed yet, but this engine's gauges climb over the soak and never return to their "
    "floor when it is idle (long-horizon decay): look for what it never frees — a request left "
    "waiting for remote KV that holds its pages, aborted or timed-out requests whose KV stays "
    "allocated, a queue entry that never leaves. A restart only resets it; the pool shrinks until "
    "requests queue or fail."
)


def _cite(c: Cite) -> str:
    match c.kind:
        case "rise":
            return f"{c.series} stayed {c.value:g} above its starting floor once idle"
        case "per_hour":
            return f"its floor climbing {c.value:g} per hour"
        case "oldest_s":
            return f"its oldest entry at least {c.value:g} s old and only ageing"
        case _:
            return f"{c.series} {c.value:g}"


def creep_text(e: TelemetryEvidence) -> str:
    """One sentence for a source's creep reading (``telemetry.engine_creep.<service>``)."""
    what = f"{e.subject} gauges over the run (KV usage, running requests, transfer queue, memory)"
    if e.state == UNKNOWN:
        return f"{what}: UNKNOWN (not healthy)"
    if e.state == QUIET:
        return f"{what}: back to their floor once idle, nothing creeps"
    return f"{what}: CREEPING: " + ", ".join(_cite(c) for c in e.cites)


def only_creep(finding: Finding) -> bool:
    """Whether the creep rule is all that supports ``finding``."""
    prefix = f"telemetry.{RULE_CREEP}."
    return bool(finding.supporting) and all(i.startswith(prefix) for i in finding.supporting)
