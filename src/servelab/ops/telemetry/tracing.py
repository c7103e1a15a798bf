"""Per-request traces around bench runs and soaks: the OTLP receiver on the spec's ``[tracing]``
endpoint.

``async with TraceCollector(spec.tracing) as traces:`` listens where the engines export their
spans (``up`` started them with their tracing switches, :mod:`servelab.core.deploy.topology`) for
the whole sweep. Around each run, :meth:`TraceCollector.anchor` reads both clocks before it and
:meth:`TraceCollector.collect` after it waits (bounded, condition-based) until every successful
request's worker spans have arrived — exporters batch, so spans come seconds late — and joins the
records to their spans (:func:`servelab.core.telemetry.traces.join_records`). A request whose
spans did not come is *untraced*. A soak holds the receiver open for its whole run and, at its
end, :meth:`TraceCollector.gather` takes every span received, once its failed and stalled
requests' spans are in (bounded).
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING

from servelab.core.deploy.spec import DeploymentSpec, TracingSpec
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.traces import (
    ClockAnchor,
    RunTraces,
    join_records,
    spans_by_request,
    traced,
)

if TYPE_CHECKING:  # grpc and the OTLP protos cost every bench, ab and soak ~0.12 s of CPU
    from servelab.io.otlp import OtlpReceiver

__all__ = [
    "ANCHOR_READS",
    "LATE_SPANS_S",
    "SETTLE_S",
    "TraceCollector",
    "read_anchor",
    "trace_collector",
]

#: The receiver's module, imported by name when a collector is made (a spec with ``[tracing]``).
_RECEIVER_MODULE = "servelab.io.otlp"
#: The least a soak's end waits for its failed requests' spans, past its own deadline if need be
#: (the engines' exporters batch: SGLang's every 500 ms by default, vLLM's every 5 s).
LATE_SPANS_S = 3.0
#: Once every request asked for has a span, how long :meth:`TraceCollector.gather` waits on for
#: the rest of theirs (the other worker's batch: the simulated workers export every 200 ms).
SETTLE_S = 1.0
#: Readings of the two clocks per anchor; the tightest is kept (:func:`read_anchor`).
ANCHOR_READS = 7


def read_anchor(reads: int = ANCHOR_READS) -> ClockAnchor:
    """The client's two clocks read together: ``time_ns()`` bracketed by two
    ``perf_counter_ns()``, ``reads`` times, keeping the tightest bracket (its midpoint against the
    wall reading). Read once and unbracketed, a preemption between the two calls (milliseconds on
    a loaded machine) would shift every client-to-worker phase by its length: ``router`` short
    (below zero past a few ms) and ``return`` long by as much, the sum still the TTFT."""
    best: tuple[int, int, int] | None = None
    for _ in range(max(reads, 1)):
        before = time.perf_counter_ns()
        wall = time.time_ns()
        after = time.perf_counter_ns()
        if best is None or after - before < best[0]:
            best = (after - before, (before + after) // 2, wall)
    assert best is not None
    return ClockAnchor(best[1], best[2])


class TraceCollector:
    """The receiver for one sweep, and the per-run join."""

    def __init__(self, spec: TracingSpec, *, wait_s: float | None = None) -> None:
        receiver = importlib.import_module(_RECEIVER_MODULE).OtlpReceiver
        self._rx: OtlpReceiver = receiver(spec.host, spec.port)
        self._wait_s = spec.wait_s if wait_s is None else wait_s

    @property
    def endpoint(self) -> str:
        return self._rx.endpoint

    @property
    def wait_s(self) -> float:
        """The longest wait for late spans (the spec's ``wait_s``)."""
        return self._wait_s

    def take(self) -> list[Span]:
        """Every span received so far, without waiting (forgotten here)."""
        return self._rx.take()

    async def __aenter__(self) -> TraceCollector:
        await self._rx.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._rx.__aexit__(exc_type, exc, tb)

    @staticmethod
    def anchor() -> ClockAnchor:
        """Both clocks read together, just before a run (:func:`read_anchor`)."""
        return read_anchor()

    async def collect(self, records: Sequence[RequestRecord], anchor: ClockAnchor) -> RunTraces:
        """Wait for the run's spans (at most the spec's ``wait_s``), then join them."""
        wanted = [r.request_id for r in records if r.ok and r.request_id]

        def all_traced(spans: list[Span]) -> bool:
            return all(traced(mine) for mine in spans_by_request(spans, wanted).values())

        complete = await self._rx.wait_for(all_traced, self._wait_s)
        return join_records(records, anchor, self._rx.take(), complete)

    async def gather(self, wanted: Sequence[str], wait_s: float) -> tuple[list[Span], bool]:
        """Every span received so far, once each request id of ``wanted`` has at least one (at
        most ``wait_s``; then :data:`SETTLE_S` more for the rest of theirs); and whether they
        all did. For a soak: its failed and stalled requests' phases so far."""
        started = time.monotonic()

        def all_seen(spans: list[Span]) -> bool:
            return all(spans_by_request(spans, wanted).values())

        complete = await self._rx.wait_for(all_seen, wait_s)
        left = wait_s - (time.monotonic() - started)
        if complete and wanted and left > 0:
            await asyncio.sleep(min(SETTLE_S, left))
        return self._rx.take(), complete


def trace_collector(spec: DeploymentSpec) -> TraceCollector | None:
    """The collector of a spec with ``[tracing]`` (None without), for ``run_bench(traces=...)``."""
    if spec.tracing is None:
        return None
    return TraceCollector(spec.tracing)
