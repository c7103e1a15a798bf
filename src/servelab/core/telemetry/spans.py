"""What the real engines' spans say about one PD request: the instants its time went through (pure).

The span shapes, read from the engines' source (``tests/contracts/``: files and versions):

- **SGLang** (``--enable-trace``; ``observability/trace.py``, ``req_time_stats.py``): per worker a
  root span ``"{role} Req {rid[:8]}"`` (``role`` ``prefill`` or ``decode``; attributes ``rid``,
  ``bootstrap_room`` in hex), under it a thread span per process and, under those, one span per
  request stage. The stages read here: the prefill's ``prefill_forward`` (its batch starts → the
  prompt is prefilled; ``prefill_waiting`` before it), the decode's ``decode_transferred`` (→ the
  KV arrived) and ``fake_output`` (→ the prefill's first token is out of the decode).
- **vLLM** (``--otlp-traces-endpoint``; ``v1/engine/output_processor.py`` ``do_tracing``): one
  ``llm_request`` span per worker and request, from its arrival to its end, with its latencies in
  seconds: ``gen_ai.latency.time_to_first_token`` (arrival → first token) and
  ``gen_ai.latency.time_in_model_prefill`` (scheduled → first token). vllm-router sends the
  prefill leg first and the decode leg after its answer, so of a request's two spans the earlier
  is the prefill's.
- **sglang-router** (only when it traces itself, ``--enable-trace``): one ``http_request`` span
  per request whose ``request_id`` attribute is the client's ``x-request-id``; it then starts its
  own trace and hands the workers its own ``traceparent``. vllm-router exports no span.

Every span here is the exporting process's wall clock, in Unix epoch nanoseconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "REQUEST_ID_ATTR",
    "ROUTER_SPAN",
    "VLLM_REQUEST_SPAN",
    "WORKER_PHASES",
    "Span",
    "WorkerMarks",
    "phases_seen",
    "worker_marks",
]

#: sglang-router's span of one request (exported only when the router traces itself).
ROUTER_SPAN = "http_request"
#: The attribute of :data:`ROUTER_SPAN` holding the client's ``x-request-id``.
REQUEST_ID_ATTR = "request_id"
#: vLLM's one span per request and worker.
VLLM_REQUEST_SPAN = "llm_request"
#: SGLang's root span of a request on a PD worker: ``"{role} Req {rid[:8]}"``.
_SGLANG_ROOT = re.compile(r"^(prefill|decode) Req \S{1,8}$")
_TTFT = "gen_ai.latency.time_to_first_token"
_IN_PREFILL = "gen_ai.latency.time_in_model_prefill"

#: The worker phases of a PD request, in the order it goes through them (the TTFT's server
#: phases, then ``decode``: the steps after the first).
WORKER_PHASES = ("prefill_queue", "prefill", "kv_transfer", "first_decode_step", "decode")


@dataclass(frozen=True)
class Span:
    """One OpenTelemetry span as received (ids as hex, times in Unix epoch nanoseconds)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def request_id(self) -> str | None:
        """The client's ``x-request-id`` a router span names (None for any other span)."""
        value = self.attributes.get(REQUEST_ID_ATTR) if self.name == ROUTER_SPAN else None
        return None if value is None else str(value)


@dataclass(frozen=True)
class WorkerMarks:
    """The instants one PD request's time to first token went through, as its workers saw them:
    the prefill's arrival, the start of its compute, its end (the prefill's answer is ready),
    the decode leg's arrival, the KV in on the decode, and the first token out of the decode."""

    prefill_start: int
    compute_start: int
    prefill_end: int
    decode_start: int
    kv_in: int
    first_token: int


def _first(spans: Sequence[Span], name: str) -> Span | None:
    hits = sorted((s for s in spans if s.name == name), key=lambda s: s.start_ns)
    return hits[0] if hits else None


def _below(root: Span, spans: Sequence[Span]) -> list[Span]:
    """Every span under ``root`` (children, their children, ...)."""
    children: dict[str, list[Span]] = {}
    for s in spans:
        children.setdefault(s.parent_id, []).append(s)
    out, todo = [], [root.span_id]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child.span_id)
    return out


def _sglang_roots(spans: Sequence[Span], role: str) -> list[Span]:
    roots = (s for s in spans if (m := _SGLANG_ROOT.match(s.name)) and m.group(1) == role)
    return sorted(roots, key=lambda s: s.start_ns)


def _sglang_pair(spans: Sequence[Span]) -> tuple[Span | None, Span | None]:
    """The request's decode root (its last attempt) and the prefill root of the same bootstrap
    room (else the last prefill root)."""
    decodes, prefills = _sglang_roots(spans, "decode"), _sglang_roots(spans, "prefill")
    decode = decodes[-1] if decodes else None
    room = None if decode is None else decode.attributes.get("bootstrap_room")
    same = [p for p in prefills if room is not None and p.attributes.get("bootstrap_room") == room]
    pick = same or prefills
    return (pick[-1] if pick else None), decode


def _sglang_marks(spans: Sequence[Span]) -> WorkerMarks | None:
    prefill, decode = _sglang_pair(spans)
    if prefill is None or decode is None:
        return None
    forward = _first(_below(prefill, spans), "prefill_forward")
    in_decode = _below(decode, spans)
    transferred, fake = _first(in_decode, "decode_transferred"), _first(in_decode, "fake_output")
    if forward is None or transferred is None or fake is None:
        return None
    return WorkerMarks(
        prefill.start_ns, forward.start_ns, forward.end_ns,
        decode.start_ns, transferred.end_ns, fake.end_ns,
    )  # fmt: skip


def _seconds_ns(span: Span, attr: str) -> int | None:
    value = span.attributes.get(attr)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return round(value * 1e9)


def _vllm_legs(spans: Sequence[Span]) -> list[Span]:
    return sorted((s for s in spans if s.name == VLLM_REQUEST_SPAN), key=lambda s: s.start_ns)


def _vllm_marks(spans: Sequence[Span]) -> WorkerMarks | None:
    legs = _vllm_legs(spans)
    if len(legs) < 2:
        return None
    prefill, decode = legs[-2], legs[-1]
    p_ttft, p_model = _seconds_ns(prefill, _TTFT), _seconds_ns(prefill, _IN_PREFILL)
    d_ttft, d_model = _seconds_ns(decode, _TTFT), _seconds_ns(decode, _IN_PREFILL)
    if p_ttft is None or p_model is None or d_ttft is None or d_model is None:
        return None
    return WorkerMarks(
        prefill.start_ns, prefill.start_ns + p_ttft - p_model, prefill.end_ns,
        decode.start_ns, decode.start_ns + d_ttft - d_model, decode.start_ns + d_ttft,
    )  # fmt: skip


def worker_marks(spans: Sequence[Span]) -> WorkerMarks | None:
    """The request's instants from its spans (one request's: SGLang's or vLLM's); None when a
    span they need has not come (untraced)."""
    if any(s.name == VLLM_REQUEST_SPAN for s in spans):
        return _vllm_marks(spans)
    return _sglang_marks(spans)


#: Per worker phase, the SGLang stage span whose end says the phase ended.
_SGLANG_EVIDENCE = {
    "prefill_queue": "prefill_waiting",
    "prefill": "prefill_forward",
    "kv_transfer": "decode_transferred",
    "first_decode_step": "fake_output",
    "decode": "decode_forward",
}


def phases_seen(spans: Sequence[Span]) -> tuple[str, ...]:
    """The worker phases (:data:`WORKER_PHASES` order) whose spans came back for one request:
    SGLang's stage spans (a phase is seen once its stage span ended; SGLang also ends a stage
    span when it aborts the request), or vLLM's ``llm_request`` spans (a worker exports one only
    for a request it finished: the prefill's covers both prefill phases, the decode's the rest)."""
    legs = _vllm_legs(spans)
    if legs:
        return WORKER_PHASES if len(legs) >= 2 else WORKER_PHASES[:2]
    names = {s.name for s in spans}
    return tuple(p for p in WORKER_PHASES if _SGLANG_EVIDENCE[p] in names)
