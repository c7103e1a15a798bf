"""The spans of a traced simulated worker, made and exported with the OpenTelemetry SDK (OTLP/gRPC):
the shapes :mod:`servelab.sim.tracing` describes. Imported only by a worker that has an endpoint.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from servelab.sim.engineargs import Engine
from servelab.sim.tracing import RequestFacts

__all__ = ["OtelSpans"]

#: A stage span: (name, start mark, end mark); marks are set on GenRequest.marks.
_Stage = tuple[str, str, str]
_SGLANG_STAGES: Mapping[str, tuple[_Stage, ...]] = {
    "prefill": (("prefill_waiting", "arrived", "computing"),
                ("prefill_forward", "computing", "done")),
    "decode": (("decode_transferred", "arrived", "kv_ready"),),
}  # fmt: skip
#: The host id SGLang puts in a thread span (its fallback without ``/etc/machine-id``: the MAC).
_HOST_ID = uuid.UUID(int=uuid.getnode()).hex


def _seconds(marks: Mapping[str, int], start: str, end: str) -> float | None:
    if start not in marks or end not in marks:
        return None
    return max(marks[end] - marks[start], 0) / 1e9


class OtelSpans:
    """Exports a worker's request spans as its engine does, over OTLP/gRPC to ``endpoint``."""

    def __init__(self, endpoint: str, role: str, engine: Engine) -> None:
        self._role, self._engine = role, engine
        provider = TracerProvider(resource=_resource(engine))
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
        self._provider: TracerProvider | None = provider
        self._propagator = TraceContextTextMapPropagator()

    def finish(
        self, headers: Mapping[str, str], marks: Mapping[str, int], facts: RequestFacts
    ) -> None:
        """Emit the request's spans (those whose marks were set), as its engine would."""
        if self._provider is None or "arrived" not in marks:
            return
        parent = self._propagator.extract({k.lower(): v for k, v in headers.items()})
        if self._engine is Engine.VLLM:
            self._vllm(self._provider.get_tracer("vllm.llm_engine"), parent, marks, facts, headers)
        else:
            self._sglang(self._provider.get_tracer("sglang server"), parent, marks, facts)

    def _sglang(
        self, tracer: Tracer, parent: Context, marks: Mapping[str, int], facts: RequestFacts
    ) -> None:
        """The root span, the scheduler's thread span and the stage spans."""
        end = marks.get("done", time.time_ns())
        attrs: dict[str, Any] = {"rid": facts.rid, "module": "sglang::request"}
        if facts.room:
            attrs["bootstrap_room"] = hex(facts.room)
        root = tracer.start_span(
            f"{self._role} Req {facts.rid[:8]}", parent, start_time=marks["arrived"],
            attributes=attrs,
        )  # fmt: skip
        label = f"{self._role.capitalize()} Scheduler"
        pid = os.getpid()
        thread = tracer.start_span(
            f"{label} [TP 0]  [PP 0] (host:{_HOST_ID[:8]} | pid:{pid})",
            set_span_in_context(root), start_time=marks["arrived"],
            attributes={"tp_rank": 0, "pp_rank": 0, "host_id": _HOST_ID, "pid": pid,
                        "thread_label": label},
        )  # fmt: skip
        inside = set_span_in_context(thread)
        for name, start, stop in _SGLANG_STAGES.get(self._role, ()):
            if start in marks and stop in marks:
                span = tracer.start_span(name, inside, start_time=marks[start])
                span.end(end_time=max(marks[stop], marks[start]))
        if self._role == "decode" and "kv_ready" in marks:
            forward = tracer.start_span("decode_forward", inside, start_time=marks["kv_ready"])
            if "first_token" in marks:
                fake = tracer.start_span(
                    "fake_output", set_span_in_context(forward), start_time=marks["kv_ready"]
                )
                fake.end(end_time=max(marks["first_token"], marks["kv_ready"]))
            forward.end(end_time=max(end, marks["kv_ready"]))
        thread.end(end_time=end)
        root.set_attributes(_sglang_finish(marks, facts, end))
        root.end(end_time=end)

    def _vllm(
        self, tracer: Tracer, parent: Context, marks: Mapping[str, int], facts: RequestFacts,
        headers: Mapping[str, str],
    ) -> None:  # fmt: skip
        """One ``llm_request`` span, for a request that finished."""
        if "done" not in marks:
            return
        scheduled = "computing" if self._role == "prefill" else "kv_ready"
        first = "first_token" if "first_token" in marks else "done"
        x_id = headers.get("X-Request-Id") or headers.get("x-request-id") or facts.rid
        attrs: dict[str, Any] = {
            "gen_ai.request.id": f"chatcmpl-{x_id}",
            "gen_ai.usage.prompt_tokens": facts.prompt_tokens,
            "gen_ai.request.max_tokens": facts.max_tokens,
            "gen_ai.response.finish_reasons": json.dumps(["length"]),
        }
        for name, start, stop in (
            ("gen_ai.latency.time_to_first_token", "arrived", first),
            ("gen_ai.latency.e2e", "arrived", "done"),
            ("gen_ai.latency.time_in_queue", "arrived", scheduled),
            ("gen_ai.latency.time_in_model_prefill", scheduled, first),
            ("gen_ai.latency.time_in_model_decode", first, "done"),
            ("gen_ai.latency.time_in_model_inference", scheduled, "done"),
        ):
            seconds = _seconds(marks, start, stop)
            if seconds is not None:
                attrs[name] = seconds
        span = tracer.start_span(
            "llm_request", parent, kind=SpanKind.SERVER, start_time=marks["arrived"],
            attributes=attrs,
        )  # fmt: skip
        span.end(end_time=marks["done"])

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()
            self._provider = None


def _resource(engine: Engine) -> Resource:
    """SGLang names its service ``sglang``; vLLM sets no service name (the SDK's default,
    ``unknown_service``) and says which module and process traced."""
    if engine is Engine.VLLM:
        attrs = {"vllm.instrumenting_module_name": "vllm.llm_engine",
                 "vllm.process_id": str(os.getpid())}  # fmt: skip
        return Resource.create(attrs)
    return Resource.create({"service.name": "sglang"})


def _sglang_finish(marks: Mapping[str, int], facts: RequestFacts, end: int) -> dict[str, Any]:
    """The root span's ``gen_ai.*`` attributes (``tokenizer_manager.convert_to_span_attrs``)."""
    attrs: dict[str, Any] = {
        "gen_ai.usage.prompt_tokens": facts.prompt_tokens,
        "gen_ai.request.id": facts.rid,
        "gen_ai.request.max_tokens": facts.max_tokens,
        "gen_ai.response.model": facts.model,
        "gen_ai.latency.e2e": max(end - marks["arrived"], 0) / 1e9,
    }
    first = marks.get("first_token", marks.get("done"))
    if first is not None:
        attrs["gen_ai.latency.time_to_first_token"] = max(first - marks["arrived"], 0) / 1e9
    return attrs
