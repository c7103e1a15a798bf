"""The join and the TTFT's phases from the real engines' span shapes (pure).

The spans are built as SGLang and vLLM export them (``tests/contracts/``: names, parents,
attributes); times are worker wall-clock ns, the client's ``perf_counter_ns`` mapped by a
:class:`ClockAnchor` with both clocks equal."""

from __future__ import annotations

from servelab.core.load.identity import request_identity, trace_of
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.traces import ClockAnchor, decompose, spans_by_request, traced

ANCHOR = ClockAnchor(0, 0)
MS = 1_000_000


def _sglang(trace: str, room: int, t0: int) -> list[Span]:
    """One PD request's SGLang spans (children of ``trace``), every boundary ``t0 + k ms``."""

    def at(k: float) -> int:
        return t0 + round(k * MS)

    def span(sid: str, parent: str, name: str, a: float, b: float, **attrs: object) -> Span:
        return Span(trace, sid, parent, name, "sglang", at(a), at(b), attrs)

    room_hex = hex(room)
    return [
        span("p0", "cp", "prefill Req 0a1b2c3d", 2, 10, rid="0a1b2c3d4e", bootstrap_room=room_hex),
        span("p1", "p0", "Prefill Scheduler [TP 0]  [PP 0] (host:x | pid:1)", 2, 10),
        span("p2", "p1", "prefill_waiting", 2, 3),
        span("p3", "p1", "prefill_forward", 3, 7),
        span("d0", "cp", "decode Req 9f8e7d6c", 2.5, 30, rid="9f8e7d6c5b", bootstrap_room=room_hex),
        span("d1", "d0", "Decode Scheduler [TP 0]  [PP 0] (host:x | pid:2)", 2.5, 30),
        span("d2", "d1", "decode_transferred", 2.5, 9),
        span("d3", "d1", "decode_forward", 9, 30),
        span("d4", "d3", "fake_output", 9, 11),
    ]


def _vllm(trace: str, t0: int) -> list[Span]:
    """vllm-router's order: the prefill leg (2 → 8 ms), then the decode leg (9 → 30 ms)."""
    prefill = {"gen_ai.latency.time_to_first_token": 0.005,
               "gen_ai.latency.time_in_model_prefill": 0.004}  # fmt: skip
    decode = {"gen_ai.latency.time_to_first_token": 0.004,
              "gen_ai.latency.time_in_model_prefill": 0.001}  # fmt: skip
    service = "unknown_service:python"
    return [
        Span(trace, "v2", "cp", "llm_request", service, t0 + 9 * MS, t0 + 30 * MS, decode),
        Span(trace, "v1", "cp", "llm_request", service, t0 + 2 * MS, t0 + 8 * MS, prefill),
    ]


def test_a_request_id_names_the_trace_its_traceparent_carries() -> None:
    rid, parent = request_identity("0123456789abcdef", 7)
    assert trace_of(rid) == parent.split("-")[1]
    assert trace_of(request_identity("0123456789abcdef", -1)[0]) == "0123456789abcdef" + "f" * 16
    assert trace_of("a client's own id") is None


def test_sglang_spans_in_the_clients_trace_tile_its_ttft() -> None:
    rid, parent = request_identity("00000000000000aa", 1)
    mine = _sglang(parent.split("-")[1], 42, 0)
    other = _sglang(request_identity("00000000000000aa", 2)[1].split("-")[1], 43, 0)
    got = spans_by_request([*mine, *other], [rid])[rid]
    assert sorted(s.span_id for s in got) == sorted(s.span_id for s in mine) and traced(got)
    b = decompose(rid, 0, MS, 12 * MS, ANCHOR, got)
    assert b is not None and b.gap_ns == 0 and b.router_span_ns is None
    assert {k: v / MS for k, v in b.phases.items()} == {
        "dispatch": 1, "router": 1, "prefill_queue": 1, "prefill": 4,
        "kv_transfer": 2, "first_decode_step": 2, "return": 1,
    }  # fmt: skip


def test_a_router_that_traces_itself_names_the_request_in_its_own_trace() -> None:
    rid = request_identity("00000000000000bb", 0)[0]
    router = Span("f" * 32, "cp", "", "http_request", "smg", 1 * MS, 13 * MS, {"request_id": rid})
    spans = [router, *_sglang("f" * 32, 9, 0)]
    got = spans_by_request(spans, [rid, "servelab-00000000000000bb-1"])
    assert len(got[rid]) == 10 and got["servelab-00000000000000bb-1"] == []
    b = decompose(rid, 0, MS, 12 * MS, ANCHOR, got[rid])
    assert b is not None and b.gap_ns == 0 and b.router_span_ns == 12 * MS


def test_the_sglang_prefill_of_the_decodes_room_is_the_one_read() -> None:
    # another prefill root in the trace (a retried attempt's), later, of another room
    other = [
        Span("t", "q0", "cp", "prefill Req 11111111", "sglang", 20 * MS, 40 * MS,
             {"rid": "11111111", "bootstrap_room": hex(6)}),
        Span("t", "q1", "q0", "Prefill Scheduler [TP 0]  [PP 0] (host:x | pid:1)", "sglang",
             20 * MS, 40 * MS),
        Span("t", "q2", "q1", "prefill_forward", "sglang", 21 * MS, 39 * MS),
    ]  # fmt: skip
    b = decompose("r", 0, MS, 12 * MS, ANCHOR, [*_sglang("t", 5, 0), *other])
    assert b is not None and b.phases["prefill"] == 4 * MS and b.gap_ns == 0


def test_vllm_spans_tile_the_ttft_from_their_latency_attributes() -> None:
    b = decompose("r", 0, MS, 14 * MS, ANCHOR, _vllm("t", 0))
    assert b is not None and b.gap_ns == 0
    assert {k: v / MS for k, v in b.phases.items()} == {
        "dispatch": 1, "router": 2, "prefill_queue": 1, "prefill": 5,
        "kv_transfer": 3, "first_decode_step": 1, "return": 1,
    }  # fmt: skip


def test_a_missing_span_leaves_the_request_untraced() -> None:
    spans = [s for s in _sglang("t", 1, 0) if s.name != "fake_output"]
    assert not traced(spans) and decompose("r", 0, MS, 12 * MS, ANCHOR, spans) is None
    assert not traced(_vllm("t", 0)[:1])  # the decode never finished: one llm_request
    assert not traced([])
