"""A traced soak's spans: at the soak's end, every span the receiver got, and for each failed or
stalled request whose spans came back, how far it got (:class:`~servelab.core.telemetry.traces.
RequestPhases`: e.g. ``prefill_queue``, ``prefill`` and no ``kv_transfer``: it stopped in the KV
transfer).

The wait is bounded twice: by the spec's ``[tracing] wait_s`` and by the soak's own deadline —
at most :data:`~servelab.ops.telemetry.tracing.LATE_SPANS_S` past it, so a soak that asked for N
seconds ends within N + 3 s even when a failed request's spans never come.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.soak.signatures import Outcome
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.traces import RequestPhases, phases_so_far, spans_by_request
from servelab.ops.telemetry.tracing import LATE_SPANS_S, TraceCollector

__all__ = ["FailedId", "gather_soak_spans", "request_phases"]


@dataclass(frozen=True)
class FailedId:
    """A failed or stalled request of the soak: its ``x-request-id`` and which request it was
    (session -1, round -1: the determinism probe)."""

    request_id: str
    session: int
    round: int
    outcome: Outcome  # stalled or error


def request_phases(failed: Sequence[FailedId], spans: Sequence[Span]) -> tuple[RequestPhases, ...]:
    """Each failed request's phases so far, in the order they failed."""
    by_request = spans_by_request(spans, [f.request_id for f in failed])
    return tuple(
        phases_so_far(f.request_id, f.session, f.round, f.outcome, by_request.get(f.request_id, []))
        for f in failed
    )


async def gather_soak_spans(
    collector: TraceCollector, failed: Sequence[FailedId], hard_deadline: float
) -> tuple[list[Span], tuple[RequestPhases, ...]]:
    """Every span received over the soak, once the failed requests' have come (bounded), and
    their phases so far."""
    left = max(hard_deadline - time.monotonic(), LATE_SPANS_S)
    spans, _complete = await collector.gather(
        [f.request_id for f in failed], min(collector.wait_s, left)
    )
    return spans, request_phases(failed, spans)
