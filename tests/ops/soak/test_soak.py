"""The soak against the real stack (simulated workers + the real sglang-router + the faulty proxy).

Each fault must give its finding: the proxy's reused-connection stall → client_proxy (fresh
connections and direct-to-router work with the same payload); the abort wedge → decode_transfer
while every health endpoint says 200; tool-call corruption → correctness; a clean run → nothing.
Every soak must end within its deadline and leave no process behind.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from servelab.core.case.record import CaseEvidence, CaseRecord
from servelab.core.ledger.codec import encode
from servelab.core.progress import ProgressEvent
from servelab.core.soak.events import EnginesStarted, Localizing, SoakStarted, StallSeen
from servelab.core.soak.observation import ProbeResult, ReplayResult
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig, SoakResult, Targets, WorkerTarget
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.soak.soak import soak
from servelab.report.soak.soak import render_soak
from tests.support.http import set_faults
from tests.support.processes import children
from tests.support.servers import serve
from tests.support.stack import SimStack, sim_stack

SCALE = 0.05


def _targets(st: SimStack, *, workers: bool = True) -> Targets:
    listed = (
        (
            WorkerTarget("prefill", "prefill", st.prefill_url),
            WorkerTarget("decode", "decode", st.decode_url),
        )
        if workers
        else ()
    )
    return Targets(st.proxy_url or st.router_url, st.router_url, listed)


def _run(
    config: SoakConfig, targets: Targets, told: list[ProgressEvent] | None = None
) -> SoakResult:
    before = children()
    saved: list[SoakResult] = []
    start = time.monotonic()
    progress = None if told is None else told.append
    result = asyncio.run(soak(config, targets, progress=progress, on_result=saved.append))
    elapsed = time.monotonic() - start
    assert elapsed < config.duration_s + 1.0, f"soak overran its deadline: {elapsed:.1f} s"
    assert saved == [result]
    assert children() == before  # the soak itself starts no process and leaves none
    return result


async def _abort_requests(url: str, n: int) -> None:
    """``n`` streamed requests cut after their first bytes (client aborts, like a mass abort)."""
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 4000,
        "stream": True,
    }
    async with aiohttp.ClientSession() as http:
        for _ in range(n):
            resp = await http.post(url + "/v1/chat/completions", json=body)
            await resp.content.readany()
            resp.close()
        for _ in range(50):
            async with http.get(url + "/_servelab/faults") as r:
                if (await r.json()).get("wedged"):
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the decode never wedged")


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    """One stack (workers + router + proxy, no fault on) shared by the module's tests."""
    with sim_stack(time_scale=SCALE, proxy=True) as st:
        yield st
    assert all(proc.poll() is not None for proc in st.procs.values())


def _router_targets(st: SimStack, *, workers: bool = True) -> Targets:
    targets = _targets(st, workers=workers)
    return Targets(st.router_url, st.router_url, targets.workers)


def test_clean_soak_gives_no_finding_and_reuses_one_connection_per_session(
    stack: SimStack,
) -> None:
    cfg = SoakConfig(sessions=3, rounds=4, idle_timeout_s=5, duration_s=30)
    result = _run(cfg, _router_targets(stack))
    fresh = _run(
        SoakConfig(sessions=2, rounds=3, idle_timeout_s=5, duration_s=30, connection="fresh"),
        _targets(stack, workers=False),
    )
    assert result.ok, (result.stalls, result.errors, result.correctness)
    assert result.findings == () and result.stalls == () and not result.localized
    assert [s.rounds_done for s in result.sessions.per_session] == [4, 4, 4]
    assert [s.connections for s in result.sessions.per_session] == [1, 1, 1]
    assert result.determinism.same_text is True
    assert result.determinism.concurrency is not None and result.determinism.concurrency >= 2
    assert fresh.ok and fresh.findings == ()
    assert [s.connections for s in fresh.sessions.per_session] == [3, 3]
    assert {w.role for w in fresh.targets.workers} == {"prefill", "decode"}  # from /workers


def test_proxy_stall_on_reused_connections_is_localized_to_client_proxy(stack: SimStack) -> None:
    assert stack.proxy_url is not None
    set_faults(stack.proxy_url, stall_reused_after=2)
    try:
        cfg = SoakConfig(sessions=3, rounds=5, idle_timeout_s=2, duration_s=30)
        told: list[ProgressEvent] = []
        result = _run(cfg, _targets(stack), told)
        fresh = _run(
            SoakConfig(sessions=2, rounds=3, idle_timeout_s=2, duration_s=20, connection="fresh"),
            _targets(stack),
        )
    finally:
        set_faults(stack.proxy_url, stall_reused_after=None)
    assert not result.ok and result.localized
    assert result.stalls and all(s.connection_requests == 2 for s in result.stalls)
    assert all(s.round == 2 and s.phase == "head" and s.payload_bytes > 0 for s in result.stalls)
    top = result.findings[0]
    assert top.layer == "client_proxy", result.findings
    assert {"replay.fresh_entry", "replay.direct_router"} <= set(top.supporting)
    replays = {o.id: o.replay for o in result.observations if isinstance(o, ReplayResult)}
    assert replays["replay.fresh_entry"].outcome == "ok"
    assert replays["replay.direct_router"].outcome == "ok"
    assert top.contradicting == ()
    assert fresh.ok and fresh.findings == ()  # fresh connections get through the same proxy
    # what it told as it went: typed events, worded by report/ (tests/report/test_progress.py)
    assert result.start is not None
    assert told[:2] == [
        EnginesStarted(result.start),  # the warm-up's, before the sessions
        SoakStarted(3, 5, _targets(stack).entry_url, "reuse"),
    ]
    stalls = [e for e in told if isinstance(e, StallSeen)]
    assert stalls == [
        StallSeen(s.session, s.round, s.connection_requests, s.payload_bytes, s.phase)
        for s in result.stalls
    ]
    localizing = {e.signature for e in told if isinstance(e, Localizing)}
    assert {loc.failure.signature for loc in result.localizations} <= localizing


def test_tool_call_corruption_under_load_is_a_correctness_finding(stack: SimStack) -> None:
    set_faults(stack.decode_url, corrupt_under_load=1)
    try:
        cfg = SoakConfig(sessions=4, rounds=4, idle_timeout_s=5, duration_s=30)
        result = _run(cfg, _targets(stack))
    finally:
        set_faults(stack.decode_url, corrupt_under_load=None)
    assert not result.stalls
    assert [f.layer for f in result.findings] == ["correctness"]
    assert any(i.kind == "tool_call_json" for i in result.correctness)


def test_the_deadline_ends_a_soak_with_partial_results(stack: SimStack) -> None:
    cfg = SoakConfig(
        sessions=2,
        rounds=50,
        think_time_s=0.5,
        idle_timeout_s=2,
        duration_s=3,
        localize=False,
        check_determinism=False,
    )
    result = _run(cfg, _targets(stack))
    assert result.deadline_hit and result.findings == ()
    assert 0 < result.sessions.rounds_done < 100
    assert result.elapsed_s < 3.5


def test_abort_wedge_is_localized_to_decode_transfer_while_health_is_200(
    stack: SimStack,
) -> None:
    set_faults(stack.decode_url, abort_wedge="2/30")
    try:
        asyncio.run(_abort_requests(stack.decode_url, 2))
        cfg = SoakConfig(sessions=2, rounds=3, idle_timeout_s=2, duration_s=25)
        result = _run(cfg, _targets(stack))
    finally:
        set_faults(stack.decode_url, abort_wedge=None)  # also unwedges
    assert result.stalls and result.localized
    assert result.determinism.reference_ok is False  # the C1 probe stalled too (fresh conn.)
    assert {s.session for s in result.stalls} == {-1, 0, 1}
    assert all(s.connection_requests == 0 for s in result.stalls)
    assert result.findings[0].layer == "decode_transfer", result.findings
    health = [
        o for o in result.observations if isinstance(o, ProbeResult) and o.probe.kind == "health"
    ]
    assert len(health) == 2 and all(o.healthy and o.probe.status == 200 for o in health)
    assert {o.id for o in health} <= set(result.findings[0].supporting)
    assert all(f.layer != "client_proxy" for f in result.findings)
    # issue 37: the pair replay shows the router is not needed: only the decode's path is named,
    # and the router is exonerated, said as such
    assert {f.layer for f in result.findings} <= {"decode_transfer", "engine_wedge"}
    assert {f.worker for f in result.findings} == {"decode"}, result.findings
    # every session stalled before a stream measured the decode rate: the non-streamed replays
    # had no deadline, so they are undecided (evidence of nothing), never stalls
    (loc,) = result.localizations
    plain = [c for c in loc.matrix.cells if not c.stream and not c.ok]
    assert plain and all(c.undecided for c in plain), render_soak(result)
    assert "UNDECIDED after" in render_soak(result)


_MODE = web.AppKey("mode", str)


def _half_answer_app() -> web.Application:
    """A chat endpoint that answers ``?mode``: one event then silence mid-event ("stall"), a
    malformed event first ("malformed"), or HTTP 503 ("fail"); ``/v1/models`` lists ``m1``."""
    app = web.Application()

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        mode = request.app[_MODE]
        if mode == "fail":
            return web.json_response({"error": {"message": "busy " * 100}}, status=503)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        delta = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}
        await resp.write(b"data: " + json.dumps(delta).encode() + b"\n\n")
        if mode == "malformed":
            await resp.write(b"data: {'bad\n\n")
        await resp.write(b'data: {"choices": [{"index": 0, "delta": {"content": " th')
        await asyncio.sleep(10)
        return resp

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m1"}]})

    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


async def _soak_mode(mode: str) -> SoakResult:
    app = _half_answer_app()
    app[_MODE] = mode
    runner, url = await serve(app)
    try:
        cfg = SoakConfig(
            sessions=1,
            rounds=2,
            idle_timeout_s=0.5,
            duration_s=10,
            localize=False,
            check_determinism=False,
        )
        return await soak(cfg, Targets(url))
    finally:
        await runner.cleanup()


def test_body_stall_evidence_and_what_is_not_a_stall() -> None:
    """Decoded from the stamped reads: a silence mid-body is a body stall with what it got; a
    malformed event before the silence is an error (as if decoded live); HTTP 503 is an error."""
    stalled = asyncio.run(_soak_mode("stall"))
    assert stalled.model == "m1" and len(stalled.stalls) == 1
    stall = stalled.stalls[0]
    assert (stall.phase, stall.reason, stall.received_events) == ("body", "idle timeout", 1)
    assert stall.received_bytes > 80 and stall.connection_requests == 0
    malformed = asyncio.run(_soak_mode("malformed"))
    assert malformed.stalls == () and malformed.errors[0].error == "malformed stream"
    failed = asyncio.run(_soak_mode("fail"))
    assert failed.stalls == () and failed.errors[0].error == "http 503"
    (session,) = failed.sessions.per_session
    assert session.rounds_done == 0 and session.connections == 1


def test_the_soak_records_itself_in_the_ledger_before_on_result(
    stack: SimStack, tmp_path: Path
) -> None:
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=5, duration_s=30)
    seen: list[int | None] = []
    with Ledger.open(tmp_path / "l.db") as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="t", status="open"))

        def on_result(result: SoakResult) -> None:
            seen.append(result.soak_id)

        result = asyncio.run(
            soak(
                cfg,
                _router_targets(stack),
                ledger=ledger,
                case_id=case_id,
                on_result=on_result,
            )
        )
        row = ledger.get(SoakRunRecord, result.soak_id or 0)
        evidence = ledger.list(CaseEvidence, case_id=case_id)
    assert result.ok and result.soak_id is not None
    assert seen == [result.soak_id]
    assert row is not None and row.ok is True
    assert row.result.sessions.rounds_done == 2
    assert [(e.kind, e.ref_id, e.note) for e in evidence] == [
        ("soak", result.soak_id, "no finding")
    ]


def test_a_soak_keeps_what_the_router_and_the_engines_counted(stack: SimStack) -> None:
    base = _router_targets(stack)
    metrics = f"http://127.0.0.1:{stack.prometheus_port}"
    targets = Targets(base.entry_url, base.router_url, base.workers, metrics_url=metrics)
    cfg = SoakConfig(sessions=2, rounds=3, idle_timeout_s=5, duration_s=30)
    result = _run(cfg, targets)
    assert result.ok and result.telemetry is not None and result.telemetry.via == "scrape"
    decode = result.telemetry.source("decode")
    assert decode is not None and decode.state == "ok"
    served = decode.counter("sglang:num_requests_total")
    assert served is not None and served >= 2 * 3  # every round, plus the soak's own probes
    router = result.telemetry.source("router")
    assert router is not None and router.state == "ok"
    doc = encode(result)
    assert doc["telemetry"]["sources"][0]["state"] == "ok"
