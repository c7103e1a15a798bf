"""Notes under a bench run's tables, shared by the console (:mod:`servelab.report.bench`) and the
run's page (:mod:`servelab.report.pages`): the run-telemetry rules' reading
(``summary["telemetry_evidence"]``), and what a long ``return`` phase is."""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.telemetry.rules import FIRED, QUIET, UNKNOWN, TelemetryEvidence
from servelab.core.telemetry.traces import RETURN_HELD_MS
from servelab.report.soak.words import telemetry_text, unknown_text

__all__ = ["evidence_lines", "evidence_rows", "return_note", "unsaved_line"]


def _mark(e: TelemetryEvidence) -> str:
    return "·" if e.state == QUIET else "!" if e.state == FIRED else "?"


def evidence_lines(evidence: Sequence[TelemetryEvidence], *, quiet: bool = True) -> list[str]:
    """One line per rule reading, marked ``!`` fired, ``?`` unknown, ``·`` quiet, citing each
    metric and its delta (``quiet=False`` leaves the quiet ones out)."""
    return [f"{_mark(e)} {telemetry_text(e)}" for e in evidence if quiet or e.state != QUIET]


def evidence_rows(evidence: Sequence[TelemetryEvidence]) -> list[tuple[str, str, str, str]]:
    """``(rule, subject, state, cited series and values)`` per reading, for a page's table
    (the series in backticks)."""
    rows = []
    for e in evidence:
        cites = "; ".join(f"{c.source}: `{c.series}` {c.kind} {c.value:g}" for c in e.cites)
        state = str(e.state)
        if e.state == FIRED and e.points_at:
            state += f" → {e.points_at}"
        if e.state == UNKNOWN and e.why is not None:
            state += f" ({unknown_text(e)})"
        rows.append((e.rule, e.subject, state, cites or "–"))
    return rows


def return_note(return_p50_ms: float | None) -> str | None:
    """Why the ``return`` phase is long, when its median is (None when it is not): it is the
    router's way back to the client, not time spent in an engine."""
    if return_p50_ms is None or return_p50_ms < RETURN_HELD_MS:
        return None
    return (
        f"return (p50 {return_p50_ms:.1f} ms) is the router's way back to the client after the "
        "decode wrote the first token, not engine time: sglang-router 0.3.2 leaves Nagle's "
        "algorithm on its client connections (no TCP_NODELAY), so on a kept-alive connection "
        "its first token chunk waits for the client's delayed ACK (at least 40 ms on Linux)"
    )


def unsaved_line(why: str) -> str:
    """What ``bench --export`` did not write (``why``: the writer's words, naming the file)."""
    return f"{why}; the bench's result is printed above, not saved"
