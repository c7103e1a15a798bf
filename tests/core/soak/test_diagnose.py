"""The pure localization rules: each failure picture gives the right layer, with its evidence."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import servelab.core.soak.diagnose as diagnose_mod
import servelab.core.soak.evidence as evidence_mod
import servelab.core.soak.observe as observe_mod
from servelab.core.soak.diagnose import diagnose, diagnosis
from servelab.core.soak.evidence import (
    CorrectnessIssue,
    EngineActivity,
    Probe,
    ProbeKind,
    Replay,
    ReplayPath,
    SoakEvidence,
    Stall,
    parse_metrics,
    parse_workers,
)
from servelab.core.soak.finding import DropReason
from servelab.core.soak.observation import (
    CorrectnessViolations,
    EngineProgress,
    FrontAnswers,
    RouterHealth,
    is_unknown,
)
from servelab.core.soak.observe import observations
from servelab.core.soak.replay import Cell, Hop, Matrix, Payload, locate
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.soak.undecided import NextProbe, UndecidedReason, undecided
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.router import router_metrics
from servelab.core.telemetry.rules import ServerView
from servelab.core.telemetry.summary import RunTelemetry, SourceTelemetry
from servelab.core.verify.coldstart import Start, StartClass, StartReason

RUN, QUEUE = "sglang:num_running_reqs", "sglang:num_queue_reqs"
GEN, REQ = "sglang:generation_tokens_total", "sglang:num_requests_total"


def _stall(carried: int, phase: Phase = Phase.HEAD) -> Stall:
    return Stall(0, carried, 2000, 1.5, carried, 0, 0, phase, "idle timeout")


def _health(prefill: bool = True, decode: bool = True) -> tuple[Probe, ...]:
    return (
        Probe("router", "router", ProbeKind.READINESS, True, 200),
        Probe("router", "router", ProbeKind.WORKERS, True, 200),
        Probe("prefill", "prefill", ProbeKind.HEALTH, prefill, 200 if prefill else 503),
        Probe("decode", "decode", ProbeKind.HEALTH, decode, 200 if decode else 503),
    )


def _engine(role: str, *, running: float, gen: float, req: float) -> EngineActivity:
    before = {RUN: 0.0, QUEUE: 0.0, GEN: 100.0, REQ: 10.0}
    after = {RUN: running, QUEUE: 0.0, GEN: 100.0 + gen, REQ: 10.0 + req}
    return EngineActivity(role, role, before, after, 3.0)


def _e2e(ok: bool) -> Probe:
    return Probe("router", "router", ProbeKind.E2E, ok, 200 if ok else None)


def _replays(fresh: Outcome, router: Outcome) -> tuple[Replay, ...]:
    return (
        Replay(ReplayPath.FRESH_ENTRY, fresh, 200 if fresh == Outcome.OK else None, 0.1),
        Replay(ReplayPath.DIRECT_ROUTER, router, 200 if router == Outcome.OK else None, 0.1),
    )


OK, STALLED, ERROR = Outcome.OK, Outcome.STALLED, Outcome.ERROR
Evidence = SoakEvidence


@pytest.mark.parametrize("module", [diagnose_mod, evidence_mod, observe_mod])
def test_public_api_is_explicit(module: object) -> None:
    for name in module.__all__:  # type: ignore[attr-defined]
        assert hasattr(module, name), name


def test_parse_metrics_sums_label_sets_and_skips_junk() -> None:
    text = (
        "# HELP sglang:num_running_reqs x\n# TYPE sglang:num_running_reqs gauge\n"
        'sglang:num_running_reqs{model_name="a",dp="0"} 3\n'
        'sglang:num_running_reqs{model_name="a",dp="1"} 2\n'
        "sglang:generation_tokens_total 1.5e3\n"
        'weird{le="+Inf"} not-a-number\n\n'
    )
    assert parse_metrics(text) == {RUN: 5.0, GEN: 1500.0}


def test_parse_workers_reads_the_router_list() -> None:
    body = json.dumps(
        {
            "workers": [
                {"url": "http://127.0.0.1:1/", "worker_type": "prefill"},
                {"url": "http://127.0.0.1:2", "worker_type": "decode"},
                {"no_url": True},
            ]
        }
    )
    assert parse_workers(body) == [
        ("prefill", "http://127.0.0.1:1"),
        ("decode", "http://127.0.0.1:2"),
    ]
    assert parse_workers("not json") == []


def test_a_clean_soak_gives_no_finding_at_all() -> None:
    assert diagnose(Evidence(via_proxy=True)) == []
    assert observations(Evidence(via_proxy=False)) == []


def test_reused_connection_stall_points_at_client_proxy() -> None:
    ev = Evidence(
        via_proxy=True,
        stalls=(_stall(2), _stall(2)),
        replays=_replays(OK, OK),
        probes=(*_health(), _e2e(True)),
        engines=(
            _engine("prefill", running=0, gen=3, req=3),
            _engine("decode", running=0, gen=40, req=3),
        ),
    )
    findings = diagnose(ev)
    top = findings[0]
    assert top.layer == "client_proxy"
    assert {"replay.fresh_entry", "replay.direct_router", "stalls.reused_connection"} <= set(
        top.supporting
    )
    assert top.contradicting == ()
    assert top.confidence >= 0.9
    assert len(findings) == 1


def test_client_proxy_is_contradicted_when_the_router_also_hangs() -> None:
    ev = Evidence(
        via_proxy=True, stalls=(_stall(0),), replays=_replays(OK, STALLED), probes=_health()
    )
    top = diagnose(ev)[0]
    assert top.layer == "client_proxy"
    assert "replay.direct_router" in top.contradicting
    assert "stalls.fresh_connection" in top.contradicting
    assert top.confidence < 0.5


def test_abort_wedge_points_at_decode_transfer_while_health_is_200() -> None:
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0), _stall(1, Phase.HEAD)),
        replays=_replays(STALLED, STALLED),
        probes=(*_health(), _e2e(False)),
        engines=(
            _engine("prefill", running=0, gen=3, req=3),
            _engine("decode", running=2, gen=0, req=3),
        ),
    )
    findings = diagnose(ev)
    assert findings[0].layer == "decode_transfer"
    assert {"probe.prefill.health", "probe.decode.health"} <= set(findings[0].supporting)
    assert "metrics.decode.progress" in findings[0].supporting
    assert [f.layer for f in findings if f.layer == "client_proxy"] == []
    wedge = [f for f in findings if f.layer == "engine_wedge"]
    assert wedge and wedge[0].confidence < findings[0].confidence
    assert "metrics.prefill.progress" in wedge[0].contradicting


def test_failed_transfers_point_at_decode_transfer() -> None:
    decode = EngineActivity(
        "decode",
        "decode",
        {"sglang:num_transfer_failed_reqs_total": 1},
        {"sglang:num_transfer_failed_reqs_total": 4},
        2.0,
    )
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0),),
        replays=_replays(ERROR, ERROR),
        probes=(*_health(), _e2e(False)),
        engines=(decode,),
    )
    top = diagnose(ev)[0]
    assert top.layer == "decode_transfer"
    assert "metrics.decode.transfer_failed" in top.supporting


def test_a_prefill_frozen_with_health_200_is_an_engine_wedge() -> None:
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0),),
        replays=_replays(STALLED, STALLED),
        probes=(*_health(), _e2e(False)),
        engines=(
            _engine("prefill", running=4, gen=0, req=2),
            _engine("decode", running=0, gen=0, req=2),
        ),
    )
    top = diagnose(ev)[0]
    assert top.layer == "engine_wedge"
    assert "metrics.prefill.progress" in top.supporting


def test_router_not_ready_and_nothing_reaching_the_engines_points_at_router() -> None:
    probes = (
        Probe("router", "router", ProbeKind.READINESS, False, 503),
        Probe("prefill", "prefill", ProbeKind.HEALTH, True, 200),
        Probe("decode", "decode", ProbeKind.HEALTH, True, 200),
        _e2e(False),
    )
    ev = Evidence(
        via_proxy=True,
        stalls=(_stall(0),),
        replays=_replays(STALLED, STALLED),
        probes=probes,
        engines=(
            _engine("prefill", running=0, gen=0, req=0),
            _engine("decode", running=0, gen=0, req=0),
        ),
    )
    top = diagnose(ev)[0]
    assert top.layer == "router"
    assert "probe.router.readiness" in top.supporting


def test_unhealthy_prefill_points_at_prefill() -> None:
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0),),
        replays=_replays(ERROR, ERROR),
        probes=(*_health(prefill=False), _e2e(False)),
    )
    top = diagnose(ev)[0]
    assert top.layer == "prefill"
    assert top.supporting[0] == "probe.prefill.health"


def test_correctness_violations_are_a_finding_of_their_own() -> None:
    issues = (
        CorrectnessIssue("tool_call_json", 1, 2, "read_file: broken"),
        CorrectnessIssue("tool_call_json", 2, 2, "run_command: broken"),
        CorrectnessIssue("nondeterministic", -1, -1, "differs at char 3"),
    )
    findings = diagnose(Evidence(via_proxy=True, issues=issues))
    assert [f.layer for f in findings] == ["correctness"]
    assert set(findings[0].supporting) == {
        "correctness.tool_call_json",
        "correctness.nondeterministic",
    }
    obs = {o.id: o for o in observations(Evidence(via_proxy=True, issues=issues))}
    tool = obs["correctness.tool_call_json"]
    assert isinstance(tool, CorrectnessViolations) and tool.count == 2


def test_confidence_stays_in_bounds_and_findings_are_sorted() -> None:
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0),),
        replays=_replays(STALLED, STALLED),
        probes=(*_health(prefill=False, decode=False), _e2e(False)),
        issues=(CorrectnessIssue("tool_call_json", 0, 0, "x"),),
    )
    findings = diagnose(ev)
    assert len(findings) >= 2
    confidences = [f.confidence for f in findings]
    assert confidences == sorted(confidences, reverse=True)
    assert all(0.05 <= c <= 0.99 for c in confidences)


def test_a_decode_frozen_with_nothing_waiting_for_kv_is_an_engine_wedge() -> None:
    queues = {
        "sglang:num_decode_prealloc_queue_reqs": 0.0,
        "sglang:num_decode_transfer_queue_reqs": 0.0,
    }
    decode = _engine("decode", running=3, gen=0, req=2)
    decode = EngineActivity("decode", "decode", decode.before, {**decode.after, **queues}, 3.0)
    ev = Evidence(
        via_proxy=False,
        stalls=(_stall(0),),
        replays=_replays(STALLED, STALLED),
        probes=(*_health(), _e2e(False)),
        engines=(_engine("prefill", running=0, gen=2, req=2), decode),
    )
    top = diagnose(ev)[0]
    assert top.layer == "engine_wedge", diagnose(ev)
    assert "metrics.decode.progress" in top.supporting
    assert all(f.layer != "decode_transfer" for f in diagnose(ev))
    obs = {o.id: o for o in observations(ev)}
    progress = obs["metrics.decode.progress"]
    assert isinstance(progress, EngineProgress) and progress.in_transfer == 0.0


# ------------------------------------------------------------------ the matrix, cold, unknown
def _matrix(*cells: Cell) -> Matrix:
    return Matrix(cells, locate(cells))


def _cell(hop: Hop, ok: bool, target: str = "entry", payload: Payload = Payload.FAILING) -> Cell:
    return Cell(hop, target, payload, True, 2000, OK if ok else STALLED)


def _pair(decode: str, ok: bool) -> Cell:
    outcome, side = (OK, "") if ok else (STALLED, "decode")
    target = f"prefill+{decode}"
    return Cell(Hop.PAIR, target, Payload.FAILING, True, 2000, outcome, side=side,
                prefill="prefill", decode=decode)  # fmt: skip


def test_a_cold_first_request_that_does_not_reproduce_convicts_nothing_and_says_why() -> None:
    c1 = Stall(-1, -1, 300, 0.0, 0, 0, 0, Phase.HEAD, "idle timeout")
    cold = StartClass(Start.COLD, StartReason.FIRST_SINCE_START, 0, 4.2, 0.1)
    base = Evidence(
        via_proxy=True, stalls=(c1,), replays=_replays(OK, OK), probes=(*_health(), _e2e(True))
    )
    assert [f.layer for f in diagnose(replace(base, start=cold))] == []
    matrix = _matrix(
        _pair("decode", True), _cell(Hop.ROUTER, True, "router"), _cell(Hop.FRESH, True)
    )
    failure = Failure(Signature.STALL_HEAD, -1, -1, 300, 0.0, 0)
    ev = replace(base, matrix=matrix, start=cold, failures=(failure,))
    assert diagnose(ev) == []
    why = undecided(ev, [])
    assert why is not None and (why.reason, why.probe) == (
        UndecidedReason.COLD,
        NextProbe.SOAK_WARM,
    )
    assert "failure.stall_head" in why.conflicting
    assert "matrix.entry_fresh.entry.failing.stream" in why.conflicting
    warm = undecided(replace(ev, start=None), [])
    assert warm is not None and warm.reason == UndecidedReason.NOT_REPRODUCED
    assert undecided(Evidence(via_proxy=True), []) is None  # nothing failed: nothing to explain


def test_a_proxy_failing_fresh_connections_while_the_router_answers_is_the_proxy() -> None:
    matrix = _matrix(
        _pair("decode", True), _cell(Hop.ROUTER, True, "router"), _cell(Hop.FRESH, False)
    )
    failure = Failure(Signature.RESET, 0, 1, 2000, 0.2, 0, 200, "truncated stream")
    ev = Evidence(via_proxy=True, probes=_health(), failures=(failure,), matrix=matrix)
    top = diagnose(ev)[0]
    assert top.layer == "client_proxy"
    assert {
        "matrix.entry_fresh.entry.failing.stream",
        "matrix.router.router.failing.stream",
    } <= set(top.supporting)


def test_one_of_two_decodes_wedged_with_health_200_and_no_metrics_is_named() -> None:
    probes = (*_health(), Probe("decode1", "decode", ProbeKind.HEALTH, True, 200))
    silent = EngineActivity("decode1", "decode", {}, {}, 3.0)
    matrix = _matrix(
        _pair("decode", True), _pair("decode1", False), _cell(Hop.ROUTER, False, "router")
    )
    failure = Failure(Signature.STALL_HEAD, 1, 2, 2000, 1.0, 1)
    ev = Evidence(
        via_proxy=True, probes=probes, engines=(silent,), failures=(failure,), matrix=matrix
    )
    top = diagnose(ev)[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode1")
    assert "matrix.pair.prefill+decode1.failing.stream" in top.supporting
    assert "matrix.pair.prefill+decode.failing.stream" in top.supporting  # works one hop in
    obs = {o.id: o for o in observations(ev)}
    assert obs["metrics.decode1.progress"].healthy is None  # unknown, not healthy
    assert is_unknown(obs["metrics.decode1.progress"])


def test_an_open_circuit_breaker_supports_the_router_finding() -> None:
    matrix = _matrix(
        _pair("decode", True), _cell(Hop.ROUTER, False, "router"), _cell(Hop.FRESH, False)
    )
    metrics = router_metrics('smg_worker_cb_state{worker="http://d"} 1\n')
    failure = Failure(Signature.HTTP_5XX, 0, 0, 2000, 0.0, 0, 503, "http 503")
    ev = Evidence(
        via_proxy=True, probes=_health(), failures=(failure,), matrix=matrix, router_metrics=metrics
    )
    top = diagnose(ev)[0]
    assert top.layer == "router" and "router_metrics.cb_open.http://d" in top.supporting
    unknown = {o.id: o for o in observations(replace(ev, router_metrics=router_metrics(None)))}
    assert unknown["router_metrics"].healthy is None
    assert isinstance(unknown["router_metrics"], RouterHealth) and is_unknown(
        unknown["router_metrics"]
    )


def test_a_later_localizations_facts_and_findings_carry_its_signature() -> None:
    matrix = _matrix(
        _pair("decode", True), _cell(Hop.ROUTER, False, "router"), _cell(Hop.FRESH, False)
    )
    failure = Failure(Signature.HTTP_5XX, 0, 0, 2000, 0.0, 0, 503, "http 503")
    probes = (Probe("router", "router", ProbeKind.READINESS, False, 503), _e2e(False))
    ev = Evidence(via_proxy=True, probes=probes, failures=(failure,), matrix=matrix)
    scoped = replace(ev, scope=Signature.HTTP_5XX)
    plain_ids = [o.id for o in observations(ev)]
    assert [o.id for o in observations(scoped)] == [f"http_5xx:{i}" for i in plain_ids]
    (top, *_) = diagnose(scoped)
    (unscoped, *_) = diagnose(ev)
    assert top.layer == unscoped.layer == Layer.ROUTER
    assert top.supporting == tuple(f"http_5xx:{i}" for i in unscoped.supporting)
    assert "http_5xx:matrix.router.router.failing.stream" in top.supporting  # the matrix's gate


def test_the_layers_keep_their_stored_values_and_order() -> None:
    assert [layer.value for layer in Layer] == [
        "client_proxy", "router", "prefill", "decode_transfer", "engine_wedge", "correctness",
        "engine_saturation", "client", "pd_pair",
    ]  # fmt: skip
    assert [r.value for r in UndecidedReason] == [
        "not_reproduced", "cold_start", "not_localized", "no_pair_replay", "conflict",
    ]  # fmt: skip
    assert [p.value for p in NextProbe] == [
        "replay_under_load", "soak_again_warm", "localize", "pair_replay", "scrape_unknown",
        "soak_again",
    ]  # fmt: skip


def _saturated_decode() -> RunTelemetry:
    """The decode's queue long, at its cap, while the requests failed (seconds 6 to 8)."""
    queue = [(float(i), q) for i, q in enumerate((0, 0, 0, 0, 0, 0, 5, 8, 9, 0))]
    running = [(float(i), r) for i, r in enumerate((2, 3, 4, 4, 3, 4, 8, 8, 8, 2))]
    gauges = {"sglang:num_queue_reqs": queue, "sglang:num_running_reqs": running}
    decode = SourceTelemetry("decode", "engine", "u", "ok", None, 10, 10.0, gauges=gauges)
    return RunTelemetry("scrape", 10.0, (decode,))


def test_answers_from_in_front_of_the_router_place_the_failure_there_alone() -> None:
    # A proxy's own 413 page: no x-request-id back, while the router's answers carry it.
    failure = Failure(Signature.HTTP_4XX, 0, 3, 4000, 0.2, 2, 413, "http 413", "<html>",
                      server="nginx/1.22.1", echoed_id=False)  # fmt: skip
    ev = Evidence(via_proxy=True, failures=(failure,), router_echoes=True)
    obs = {o.id: o for o in observations(ev)}
    front = obs["answers.front"]
    assert isinstance(front, FrontAnswers)
    assert (front.count, front.servers, front.statuses) == (1, ("nginx/1.22.1",), (413,))
    (top,) = diagnose(ev)
    assert (top.layer, top.supporting) == ("client_proxy", ("answers.front",))
    # Without the router's own id on its answers there is nothing to tell them apart by.
    assert "answers.front" not in {o.id for o in observations(replace(ev, router_echoes=False))}
    assert diagnose(replace(ev, router_echoes=False)) == []


def test_a_finding_a_stronger_one_further_out_explains_is_dropped_saying_why() -> None:
    # The issue's case: a proxy rejects the payload (the router answers it), and the decode's
    # saturation rule fired: the proxy's finding explains the failures, the saturation goes.
    matrix = _matrix(
        _pair("decode", True), _cell(Hop.ROUTER, True, "router"), _cell(Hop.FRESH, False)
    )
    failure = Failure(Signature.HTTP_4XX, 0, 3, 4000, 0.2, 2, 413, "http 413", "<html>")
    ev = Evidence(via_proxy=True, probes=_health(), failures=(failure,), matrix=matrix)
    server = ServerView(_saturated_decode(), {"decode": "decode"}, failing=((6.0, 8.0),))
    found = diagnosis(ev, server)
    assert [f.layer for f in found.findings] == ["client_proxy"]
    (dropped,) = found.dropped
    assert (dropped.layer, dropped.by, dropped.reason, dropped.worker) == (
        "engine_saturation", "client_proxy", DropReason.INNER_HOP_WORKED, "decode",
    )  # fmt: skip
    assert "matrix.router.router.failing.stream" in dropped.because
    # ... and its reading no longer lowers the proxy's confidence.
    assert "telemetry.engine_saturation.decode" not in found.findings[0].contradicting
    alone = diagnosis(replace(ev, matrix=None), server)  # nothing located: it stands
    assert [f.layer for f in alone.findings] == ["engine_saturation"] and alone.dropped == ()


def test_not_reproduced_alone_nor_at_its_load_suggests_soaking_again() -> None:
    cells = [_pair("decode", True), _cell(Hop.ROUTER, True, "router"), _cell(Hop.FRESH, True)]
    loaded = [replace(c, payload=Payload.LOADED, copies=4) for c in cells]
    failure = Failure(Signature.HTTP_5XX, 0, 0, 1400, 0.0, 0, 503, "http 503", in_flight=4)
    ev = Evidence(via_proxy=True, failures=(failure,), matrix=_matrix(*cells, *loaded))
    why = undecided(ev, [])
    assert why is not None and (why.reason, why.probe) == (
        UndecidedReason.NOT_REPRODUCED, NextProbe.SOAK_AGAIN,
    )  # fmt: skip
    alone = undecided(replace(ev, matrix=_matrix(*cells)), [])
    assert alone is not None and alone.probe == NextProbe.REPLAY_UNDER_LOAD
