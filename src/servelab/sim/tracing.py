"""The simulated worker as a traced engine: OpenTelemetry spans for its real phases.

With ``SERVELAB_SIM_OTLP_ENDPOINT=HOST:PORT`` the worker exports, over OTLP/gRPC with the
OpenTelemetry SDK, one span per phase of every generation request, timed by the worker's own wall
clock as the phase happened:

- prefill: ``prefill_queue`` (arrival → its batch starts), ``prefill`` (batch → prefilled);
- decode: ``kv_transfer`` (arrival → the KV is in: bootstrap wait, transfer, a cold engine's
  warm-up), ``first_decode_step`` (KV in → the first token written), ``decode`` (→ the last).

Each span is a child of the ``traceparent`` the request arrived with (the router's, through
sglang-router) and carries the client's ``x-request-id`` as ``servelab.request_id``, so a client
record joins its spans by request id (:mod:`servelab.core.telemetry.traces`). Without the variable,
tracing is off and costs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from servelab.core.telemetry.traces import REQUEST_ID_ATTR
from servelab.sim.settings import ENV_OTLP

__all__ = ["ENV_OTLP", "PHASE_SPANS", "SimTracer", "mark"]

#: Per role: (span name, start mark, end mark); marks are set on GenRequest.marks.
PHASE_SPANS: Mapping[str, tuple[tuple[str, str, str], ...]] = {
    "prefill": (("prefill_queue", "arrived", "computing"), ("prefill", "computing", "done")),
    "decode": (
        ("kv_transfer", "arrived", "kv_ready"),
        ("first_decode_step", "kv_ready", "first_token"),
        ("decode", "first_token", "done"),
    ),
}


def mark(marks: dict[str, int], name: str, at_ns: int | None = None) -> None:
    """Set a phase mark once (the first time wins): the worker's wall clock, in ns."""
    marks.setdefault(name, time.time_ns() if at_ns is None else at_ns)


class SimTracer:
    """Exports the phase spans of a worker's requests (a no-op without an endpoint)."""

    def __init__(self, endpoint: str | None, role: str) -> None:
        self._role = role
        self._provider: TracerProvider | None = None
        if endpoint:
            resource = Resource.create({"service.name": f"servelab-sim-{role}"})
            provider = TracerProvider(resource=resource)
            exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
            provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
            self._provider = provider
        self._propagator = TraceContextTextMapPropagator()

    @property
    def enabled(self) -> bool:
        return self._provider is not None

    def finish(
        self, headers: Mapping[str, str], marks: Mapping[str, int], attrs: Mapping[str, Any]
    ) -> None:
        """Emit the role's phase spans whose two marks were set."""
        if self._provider is None:
            return
        tracer = self._provider.get_tracer("servelab.sim")
        parent = self._propagator.extract({k.lower(): v for k, v in headers.items()})
        common = {**{k: v for k, v in attrs.items() if v is not None}, "servelab.role": self._role}
        rid = headers.get("x-request-id") or headers.get("X-Request-Id")
        if rid:
            common[REQUEST_ID_ATTR] = rid
        for name, start, end in PHASE_SPANS.get(self._role, ()):
            if start in marks and end in marks:
                span = tracer.start_span(
                    name, context=parent, start_time=marks[start], attributes=common
                )
                span.end(end_time=max(marks[end], marks[start]))

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None
