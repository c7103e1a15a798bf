"""The conviction rule and the replay cells' clocks (pure): a layer is named only when the
failure needs it or evidence at it shows it failing; a non-streamed cell is judged by a deadline
from its expected answer, never by the stream's idle timeout, and is undecided without one."""

from __future__ import annotations

from servelab.core.load.records import RequestRecord
from servelab.core.soak.clock import (
    FLOOR_S,
    PLAIN_MARGIN,
    Clock,
    DecodeRate,
    clock_of,
    expected_tokens,
    measured_rate,
    plain_deadline,
)
from servelab.core.soak.conviction import Standing, bypassed, standing
from servelab.core.soak.diagnose import diagnosis
from servelab.core.soak.evidence import EngineActivity, Probe, ProbeKind, SoakEvidence
from servelab.core.soak.replay import Cell, Hop, Located, Matrix, Payload, Reason, locate
from servelab.core.soak.signatures import Failure, Outcome, Signature
from servelab.core.telemetry.layers import Layer

OK, STALLED = Outcome.OK, Outcome.STALLED


# ------------------------------------------------------------------------------------ clocks
def _stream(tokens: int, ttft_s: float, decode_s: float) -> RequestRecord:
    r = RequestRecord(index=0, scheduled_ns=0, sent_ns=1_000_000_000, output_tokens=tokens)
    first = r.sent_ns + int(ttft_s * 1e9)
    r.event_ns = [first, first + int(decode_s * 1e9)]
    r.first_byte_ns, r.end_ns = first, r.event_ns[-1]
    return r


def test_the_rate_and_the_first_token_are_the_medians_of_the_successful_streams() -> None:
    failed = _stream(101, 9.0, 0.1)
    failed.fail("idle timeout")
    rate = measured_rate(
        [_stream(101, 0.2, 1.0), _stream(201, 0.5, 1.0), _stream(51, 0.1, 1.0), failed]
    )
    assert rate == DecodeRate(100.0, 0.2, 3)
    assert measured_rate([failed, RequestRecord(index=1, scheduled_ns=0)]) is None


def test_a_non_streamed_deadline_comes_from_the_expected_answer_and_the_measured_rate() -> None:
    rate = DecodeRate(tokens_per_s=100.0, ttft_s=0.2, streams=4)
    # 512 tokens at 100 tok/s, margin 3, plus the first token: far past a 3 s idle timeout
    assert plain_deadline(512, rate) == PLAIN_MARGIN * (0.2 + 512 / 100.0)
    assert plain_deadline(512, rate) > 3.0
    assert plain_deadline(1, rate) == FLOOR_S  # never shorter than the floor
    assert plain_deadline(None, rate) is None  # no answer length stated
    assert plain_deadline(512, None) is None  # no stream measured a rate
    assert plain_deadline(512, DecodeRate(0.0, 0.1, 1)) is None
    assert expected_tokens({"max_tokens": 64}) == 64
    assert expected_tokens({"max_completion_tokens": 32, "max_tokens": 64}) == 32
    assert expected_tokens({"max_tokens": True}) is None and expected_tokens({}) is None


def test_a_cell_is_judged_by_its_own_clock_and_undecided_without_one() -> None:
    assert clock_of(stream=True, stalled=True, deadline=None) == Clock.IDLE
    assert clock_of(stream=False, stalled=True, deadline=15.0) == Clock.DEADLINE
    assert clock_of(stream=False, stalled=True, deadline=None) == Clock.UNDECIDED
    assert clock_of(stream=False, stalled=False, deadline=None) == Clock.ANSWER


def _cell(hop: Hop, ok: bool, *, stream: bool = True, clock: Clock = Clock.IDLE) -> Cell:
    target = {Hop.PAIR: "prefill+decode", Hop.ROUTER: "router"}.get(hop, "entry")
    side = "" if ok else "decode"
    return Cell(hop, target, Payload.FAILING, stream, 2000, OK if ok else STALLED, side=side,
                prefill="prefill", decode="decode", clock=clock)  # fmt: skip


def test_an_undecided_non_streamed_cell_convicts_no_decode_path() -> None:
    streams = [_cell(Hop.PAIR, True), _cell(Hop.ROUTER, True), _cell(Hop.FRESH, False)]
    # before: a non-streamed answer slower than the idle timeout read as stalled on the decode
    plain = [_cell(h, False, stream=False) for h in (Hop.PAIR, Hop.ROUTER, Hop.FRESH)]
    old = locate([*streams, *plain])
    assert (old.layer, old.reason) == (Layer.CLIENT_PROXY, Reason.PROXY)
    assert any(".pair." in c for c in old.conflicting)  # the pair's plain cell conflicted
    # no deadline known: the plain cells are undecided, evidence of nothing
    undecided = [
        _cell(h, False, stream=False, clock=Clock.UNDECIDED) for h in (Hop.PAIR, Hop.ROUTER)
    ]
    loc = locate([*streams, *undecided])
    assert (loc.layer, loc.reason, loc.conflicting) == (Layer.CLIENT_PROXY, Reason.PROXY, ())
    # streams that all answer and plain cells undecided: nothing reproduced, no decode convicted
    alone = locate([_cell(Hop.PAIR, True), _cell(Hop.ROUTER, True), *undecided])
    assert (alone.layer, alone.reason) == (None, Reason.NOT_REPRODUCED)
    plain_pair = locate([_cell(Hop.PAIR, True), _cell(Hop.PAIR, False, stream=False)])
    assert plain_pair.layer == Layer.DECODE_TRANSFER  # the same stall judged by a deadline counts


# ---------------------------------------------------------------------------- the conviction
def _located(hop: Hop, layer: Layer) -> Located:
    return Located(layer, None, hop, Reason.ENGINE_PAIR, ("matrix.x",), ())


def test_a_layer_the_matrix_bypassed_is_exonerated_whatever_else() -> None:
    at_pair = _located(Hop.PAIR, Layer.DECODE_TRANSFER)
    assert bypassed(Layer.ROUTER, at_pair) and bypassed(Layer.CLIENT_PROXY, at_pair)
    assert not bypassed(Layer.DECODE_TRANSFER, at_pair) and not bypassed(Layer.CLIENT, at_pair)
    assert standing(Layer.ROUTER, ["r"], at_pair, ["r"]) == Standing.EXONERATED
    at_router = _located(Hop.ROUTER, Layer.ROUTER)
    assert standing(Layer.CLIENT_PROXY, [], at_router, []) == Standing.EXONERATED
    assert standing(Layer.ROUTER, [], at_router, []) == Standing.NEEDED
    assert standing(Layer.PREFILL, ["h"], at_router, ["h"]) == Standing.SHOWN_FAILING
    assert standing(Layer.PREFILL, ["x"], at_router, ["h"]) == Standing.NOT_SHOWN_NEEDED
    assert standing(Layer.ROUTER, ["x"], None, []) == Standing.SHOWN_FAILING  # no differential
    nothing = Located(None, None, None, Reason.NOT_REPRODUCED)
    assert standing(Layer.ROUTER, ["x"], nothing, []) == Standing.SHOWN_FAILING


def test_the_wedged_decode_names_only_the_decode_path_and_exonerates_the_router() -> None:
    # The router's readiness fails (its health checks reach the wedged decode), so its rule
    # fires; the same payload fails the same way straight to the pair, without the router.
    probes = (
        Probe("router", "router", ProbeKind.READINESS, False, 503),
        Probe("router", "router", ProbeKind.WORKERS, True, 200),
        Probe("prefill", "prefill", ProbeKind.HEALTH, True, 200),
        Probe("decode", "decode", ProbeKind.HEALTH, True, 200),
        Probe("router", "router", ProbeKind.E2E, False, None),
    )
    run, queue = "sglang:num_running_reqs", "sglang:num_queue_reqs"
    gen, req = "sglang:generation_tokens_total", "sglang:num_requests_total"
    before = {run: 0.0, queue: 0.0, gen: 100.0, req: 10.0}
    prefill = EngineActivity("prefill", "prefill", before, {**before, gen: 110.0, req: 20.0}, 3)
    decode = EngineActivity("decode", "decode", before, {**before, run: 1.0, queue: 5.0}, 3)
    cells = (_cell(Hop.PAIR, False), _cell(Hop.ROUTER, False))
    failure = Failure(Signature.STALL_HEAD, 0, 1, 2000, 0.0, 0)
    base = SoakEvidence(via_proxy=False, probes=probes, engines=(prefill, decode),
                        failures=(failure,))  # fmt: skip
    without = diagnosis(base)
    assert Layer.ROUTER in {f.layer for f in without.findings}  # no matrix: the rule stands
    found = diagnosis(SoakEvidence(**{**_fields(base), "matrix": Matrix(cells, locate(cells))}))
    assert found.findings[0].layer == Layer.DECODE_TRANSFER
    assert {f.layer for f in found.findings} <= {Layer.DECODE_TRANSFER, Layer.ENGINE_WEDGE}
    router = [e for e in found.exonerated if e.layer == Layer.ROUTER]
    assert len(router) == 1 and router[0].standing == Standing.EXONERATED
    assert router[0].by == Hop.PAIR and router[0].confidence > 0
    assert router[0].because == ("matrix.pair.prefill+decode.failing.stream",)


def _fields(ev: SoakEvidence) -> dict[str, object]:
    return {k: getattr(ev, k) for k in SoakEvidence.__dataclass_fields__}
