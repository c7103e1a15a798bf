"""An OTLP/gRPC trace receiver for the duration of a run (loopback by default).

``async with OtlpReceiver() as rx: ...`` listens on ``rx.endpoint`` (``HOST:PORT``, the form
sglang-router's ``--otlp-traces-endpoint`` and the OpenTelemetry exporters take) and keeps every
span exported to it as a :class:`~servelab.core.telemetry.spans.Span`. Built on PyPI's
``opentelemetry-proto`` messages and ``grpcio``'s asyncio server; nothing is written to disk.

An export is only kept as it arrived (parsed by protobuf's C code) while a run's load is live;
turning its spans into :class:`Span` objects (~16 µs each in Python) waits until someone asks
(:attr:`OtlpReceiver.spans`, :meth:`OtlpReceiver.take`, :meth:`OtlpReceiver.wait_for`), so the
receiver costs the load generator's loop almost nothing per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from servelab.core.telemetry.spans import Span
from servelab.errors import HostError

__all__ = ["OtlpReceiver", "spans_of"]


def _value(v: common_pb2.AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def _attrs(pairs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def spans_of(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    """Every span of one export request, with its resource's ``service.name``."""
    out = []
    for rs in request.resource_spans:
        service = str(_attrs(rs.resource.attributes).get("service.name", ""))
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    Span(
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                        s.name,
                        service,
                        s.start_time_unix_nano,
                        s.end_time_unix_nano,
                        _attrs(s.attributes),
                    )
                )
    return out


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(
        self, sink: list[trace_service_pb2.ExportTraceServiceRequest], arrived: asyncio.Event
    ) -> None:
        self._sink, self._arrived = sink, arrived

    async def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._sink.append(request)  # converted when asked for, not on the run's loop now
        self._arrived.set()
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """A TraceService server on ``host`` (port 0 = any free port) collecting spans in memory."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host, self._port = host, port
        self._spans: list[Span] = []
        self._pending: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self._arrived = asyncio.Event()
        self._server: grpc.aio.Server | None = None

    @property
    def endpoint(self) -> str:
        return f"{self._host}:{self._port}"

    def _convert(self) -> None:
        pending, self._pending[:] = list(self._pending), []
        for request in pending:
            self._spans.extend(spans_of(request))

    @property
    def spans(self) -> list[Span]:
        self._convert()
        return list(self._spans)

    def take(self) -> list[Span]:
        """Every span received so far, forgotten here (the next run starts empty)."""
        got = self.spans
        del self._spans[: len(got)]
        return got

    async def __aenter__(self) -> OtlpReceiver:
        server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _Service(self._pending, self._arrived), server
        )
        bound = server.add_insecure_port(f"{self._host}:{self._port}")
        if bound == 0:
            raise HostError(f"the OTLP receiver cannot listen on {self._host}:{self._port}")
        self._port = bound
        await server.start()
        self._server = server
        return self

    async def wait_for(self, done: Any, timeout: float) -> bool:
        """Wait (bounded) until ``done(spans)`` holds; True when it did before the timeout.
        Exporters batch, so spans arrive seconds after their request ended."""
        deadline = time.monotonic() + timeout
        while not done(self.spans):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))
        return True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None
