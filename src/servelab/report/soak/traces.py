"""A traced soak's phase lines: for each failed or stalled request whose spans came back, which
worker phases it got through and where it stopped.

The workers export a phase's span once the phase has ended (a failed KV transfer ends too), so
the phases listed are the ones the request got to the end of, and the request stopped in or
after the last of them: the next phase never ended (or its span was lost). Nothing is guessed
past what came back.
"""

from __future__ import annotations

from servelab.core.soak.result import SoakResult
from servelab.core.telemetry.traces import RequestPhases

__all__ = ["PHASE_NAMES", "phase_line", "trace_lines"]

#: The worker phases in words.
PHASE_NAMES = {
    "prefill_queue": "the prefill queue",
    "prefill": "the prefill",
    "kv_transfer": "the KV transfer",
    "first_decode_step": "the first decode step",
    "decode": "the decode steps",
}
_SHOWN = 10


def phase_line(p: RequestPhases) -> str:
    """One request: its phases so far and where it stopped."""
    who = f"session {p.session} round {p.round}" if p.session >= 0 else "C1 probe"
    head = f"  {who} ({p.outcome}, {p.request_id}): "
    if p.last is None:
        router = f"{p.n_spans} router span(s) only" if p.n_spans else "no span came back"
        return head + f"{router}: it never got through the prefill queue, or its spans were lost"
    seen = ", ".join(p.seen)
    if p.first_missing is None:
        return head + f"spans {seen}: the decode steps ended (it stopped on the way back)"
    return (
        head + f"spans {seen}; none for {p.first_missing}: it stopped in or after "
        f"{PHASE_NAMES[p.last]} ({PHASE_NAMES[p.first_missing]} never ended)"
    )


def trace_lines(result: SoakResult) -> list[str]:
    """``traces: N span(s) received`` and a line per failed request (none: tracing off)."""
    traces = result.traces
    if traces is None:
        return []
    lines = [f"traces: {traces.n_spans} span(s) received over the soak"]
    if traces.requests:
        lines.append("where the failed requests stopped (by the worker spans that came back):")
        lines += [phase_line(p) for p in traces.requests[:_SHOWN]]
        if len(traces.requests) > _SHOWN:
            lines.append(f"  ... {len(traces.requests) - _SHOWN} more")
    return lines
