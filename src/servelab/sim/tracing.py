"""The simulated worker as a traced engine: the spans the real engines export, timed by its phases.

Tracing is on as the engine's own arguments switch it on (SGLang: ``--enable-trace`` with
``--otlp-traces-endpoint``, vLLM: ``--otlp-traces-endpoint``; or servelab's
``SERVELAB_SIM_OTLP_ENDPOINT``); spans go over OTLP/gRPC with the OpenTelemetry SDK, each request's
once it is answered, timed by the worker's own wall clock as its phases happened (its marks). The
shapes are the engines' (``tests/contracts/``):

- **SGLang** (``observability/trace.py``, ``req_time_stats.py``; service ``sglang``): a root span
  ``"{role} Req {rid[:8]}"`` (attributes ``rid``, ``module`` ``sglang::request``,
  ``bootstrap_room`` in hex, and the ``gen_ai.*`` ones set when the request finished), child of
  the ``traceparent`` the request arrived with; below it the scheduler's thread span
  (``"Prefill Scheduler [TP 0]  [PP 0] (host:… | pid:…)"``) and its stage spans. Of SGLang's
  stages the simulator emits the ones its model has: a prefill's ``prefill_waiting`` (arrival →
  its batch starts) and ``prefill_forward`` (→ prefilled); a decode's ``decode_transferred``
  (arrival → the KV is in: bootstrap, transfer, a cold engine's warm-up), ``decode_forward`` (→
  the last token) and, inside it, ``fake_output`` (→ the prefill's first token written).
- **vLLM** (``v1/engine/output_processor.py`` ``do_tracing``): one ``llm_request`` span (kind
  SERVER) per finished request, child of the ``traceparent``, from its arrival to its end, with
  ``gen_ai.request.id`` (``chatcmpl-`` and the ``X-Request-Id``), the latencies in seconds
  (``gen_ai.latency.time_to_first_token``, ``.time_in_queue``, ``.time_in_model_prefill``,
  ``.time_in_model_decode``, ``.time_in_model_inference``, ``.e2e``) and
  ``gen_ai.usage.prompt_tokens``. A request that did not finish has no span, as in vLLM.

Not emitted: SGLang's other stages (``tokenize``, ``decode_prepare``, ``decode_bootstrap``,
``decode_waiting``, the per-step ``decode_loop``...) and the completion-token counts. Without an
endpoint, tracing is off and costs nothing: the OpenTelemetry SDK (:mod:`servelab.sim.otelspans`,
about 0.2 s of CPU to import) is imported only when a worker has an endpoint.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from servelab.sim.engineargs import Engine

__all__ = ["RequestFacts", "SimTracer", "mark"]

#: Where the spans are made and exported (the OpenTelemetry SDK): imported by name, on first use.
_SPANS_MODULE = "servelab.sim.otelspans"


def mark(marks: dict[str, int], name: str, at_ns: int | None = None) -> None:
    """Set a phase mark once (the first time wins): the worker's wall clock, in ns."""
    marks.setdefault(name, time.time_ns() if at_ns is None else at_ns)


@dataclass(frozen=True)
class RequestFacts:
    """What a request's spans say about it besides its marks: the engine's request id (SGLang's
    ``rid``; vLLM's is built from ``X-Request-Id``), its first item's bootstrap room and prompt
    tokens, its ``max_tokens``, and the served model's name."""

    rid: str
    room: int | None
    prompt_tokens: int
    max_tokens: int
    model: str


class _Spans(Protocol):
    """What :class:`~servelab.sim.otelspans.OtelSpans` does for a traced worker."""

    def finish(
        self, headers: Mapping[str, str], marks: Mapping[str, int], facts: RequestFacts
    ) -> None: ...

    def shutdown(self) -> None: ...


class SimTracer:
    """Exports a worker's request spans as its engine does (a no-op without an endpoint)."""

    def __init__(self, endpoint: str | None, role: str, engine: Engine) -> None:
        self._spans: _Spans | None = None
        if endpoint:
            self._spans = importlib.import_module(_SPANS_MODULE).OtelSpans(endpoint, role, engine)

    def finish(
        self, headers: Mapping[str, str], marks: Mapping[str, int], facts: RequestFacts
    ) -> None:
        """Emit the request's spans (those whose marks were set), as its engine would."""
        if self._spans is not None:
            self._spans.finish(headers, marks, facts)

    def shutdown(self) -> None:
        if self._spans is not None:
            self._spans.shutdown()
            self._spans = None
