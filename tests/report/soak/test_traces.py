"""The traced soak's phase line, for each way a request's spans can come back."""

from __future__ import annotations

from servelab.core.telemetry.traces import RequestPhases
from servelab.report.soak.traces import phase_line


def test_phase_lines_say_what_came_back_and_no_more() -> None:
    wedged = RequestPhases("servelab-a-0", 0, 1, "stalled", ("prefill_queue", "prefill"), 3)
    assert phase_line(wedged) == (
        "  session 0 round 1 (stalled, servelab-a-0): spans prefill_queue, prefill; none for "
        "kv_transfer: it stopped in or after the prefill (the KV transfer never ended)"
    )
    probe = RequestPhases("servelab-b-0", -1, -1, "stalled", (), 0)
    assert "C1 probe" in phase_line(probe) and "no span came back" in phase_line(probe)
    routed = RequestPhases("servelab-c-0", 2, 0, "error", (), 1)
    assert "1 router span(s) only" in phase_line(routed)
    done = RequestPhases("servelab-d-0", 0, 0, "error", ("prefill", "decode"), 2)
    assert "the decode steps ended (it stopped on the way back)" in phase_line(done)
