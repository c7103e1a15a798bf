"""The run telemetry's rules (pure): each reads recorded-looking telemetry, fires with the metric
it cites, stays quiet on a clean run, and is unknown (never quiet) for a source that did not
answer; the diagnosis uses them as evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import servelab.core.telemetry.rules as rules_mod
from servelab.core.soak.diagnose import diagnose
from servelab.core.soak.evidence import Replay, ReplayPath, SoakEvidence, Stall
from servelab.core.soak.observation import is_unknown
from servelab.core.soak.signatures import Outcome, Phase
from servelab.core.soak.undecided import undecided
from servelab.core.telemetry.rules import (
    CLIENT_TOLERANCE,
    FIRED,
    QUIET,
    UNKNOWN,
    ClientWindow,
    ServerView,
    TelemetryEvidence,
    assess,
    telemetry_observations,
)
from servelab.core.telemetry.summary import RunTelemetry, SourceTelemetry
from servelab.core.telemetry.unknown import Unknown
from servelab.report.soak.words import unknown_text

ROLES = {"prefill": "prefill", "decode": "decode"}
GEN = 'sglang:generation_tokens_total{model_name="sim"}'
FAILED = 'sglang:num_transfer_failed_reqs_total{model_name="sim"}'
QUEUE = 'sglang:num_queue_reqs{model_name="sim"}'
RUNNING = 'sglang:num_running_reqs{model_name="sim"}'
W = "http://127.0.0.1:18094"


def _engine(
    name: str,
    counters: Mapping[str, float] | None = None,
    queue: Sequence[float] = (0, 0, 0, 0),
    running: Sequence[float] | None = None,
) -> SourceTelemetry:
    gauges = {QUEUE: [(float(i), float(q)) for i, q in enumerate(queue)]}
    if running is not None:
        gauges[RUNNING] = [(float(i), float(r)) for i, r in enumerate(running)]
    base = {GEN: 200.0, FAILED: 0.0}
    return SourceTelemetry(
        name, "engine", f"http://x/{name}/metrics", "ok", None, len(queue), 4.0,
        base | dict(counters or {}), {}, {}, gauges,
    )  # fmt: skip


def _router(counters: Mapping[str, float] | None = None, cb: float = 0.0) -> SourceTelemetry:
    base = {'smg_http_responses_total{error_code="",status_code="200"}': 20.0}
    gauges = {f'smg_worker_cb_state{{worker="{W}"}}': [(0.0, 0.0), (4.0, cb)]}
    return SourceTelemetry(
        "router", "router", "http://x/router/metrics", "ok", None, 5, 4.0,
        base | dict(counters or {}), {}, {}, gauges,
    )  # fmt: skip


def _silent(name: str, kind: str = "engine") -> SourceTelemetry:
    return SourceTelemetry(name, kind, "http://x", "unknown", "connection refused")  # type: ignore[arg-type]


def _run(*sources: SourceTelemetry) -> RunTelemetry:
    return RunTelemetry("scrape", 4.0, sources)


def _clean(**over: SourceTelemetry) -> RunTelemetry:
    parts = {"prefill": _engine("prefill"), "decode": _engine("decode"), "router": _router()}
    return _run(*(parts | over).values())


def _view(run: RunTelemetry, tokens: int = 200, complete: bool = True, **kw: object) -> ServerView:
    return ServerView(run, ROLES, ClientWindow(tokens, complete), **kw)  # type: ignore[arg-type]


def _by_rule(evidence: Sequence[TelemetryEvidence]) -> dict[str, TelemetryEvidence]:
    return {e.id: e for e in evidence}


def _stall() -> Stall:
    return Stall(0, 1, 2000, 1.5, 1, 0, 0, Phase.HEAD, "idle timeout")


def test_public_api_is_explicit() -> None:
    for name in rules_mod.__all__:
        assert hasattr(rules_mod, name), name


def test_a_clean_run_fires_nothing() -> None:
    got = _by_rule(assess(_view(_clean())))
    assert {e.state for e in got.values()} == {QUIET}, got
    assert set(got) == {
        "telemetry.engine_saturation.prefill", "telemetry.engine_transfer.decode",
        "telemetry.engine_saturation.decode", "telemetry.router_errors.router",
        "telemetry.client_vs_server.decodes",
    }  # fmt: skip
    assert assess(None) == () and assess(ServerView(None)) == ()


def test_router_counted_worker_errors_point_at_the_workers_and_cite_the_deltas() -> None:
    errs = 'smg_worker_errors_total{error_type="backend_error",worker_type="decode"}'
    retries = 'smg_worker_retries_total{endpoint="chat",worker_type="decode"}'
    run = _clean(router=_router({errs: 10.0, retries: 36.0}))
    e = _by_rule(assess(_view(run)))["telemetry.router_errors.router"]
    assert (e.state, e.points_at) == (FIRED, "workers")
    assert {(c.series, c.value) for c in e.cites} == {(errs, 10.0), (retries, 36.0)}


def test_router_refusing_with_an_open_breaker_points_at_the_router() -> None:
    refused = 'smg_http_responses_total{error_code="server_selection_failed",status_code="503"}'
    opened = f'smg_worker_cb_transitions_total{{from="closed",to="open",worker="{W}"}}'
    run = _clean(router=_router({refused: 7.0, opened: 1.0}, cb=1.0))
    e = _by_rule(assess(_view(run)))["telemetry.router_errors.router"]
    assert (e.state, e.points_at) == (FIRED, "router")
    series = {c.series: (c.value, c.kind) for c in e.cites}
    assert series[refused] == (7.0, "delta") and series[opened] == (1.0, "delta")
    assert series[f'smg_worker_cb_state{{worker="{W}"}}'] == (1.0, "last")


def test_transfer_failures_on_a_decode_point_at_that_decode() -> None:
    run = _clean(decode=_engine("decode", {FAILED: 3.0}))
    e = _by_rule(assess(_view(run)))["telemetry.engine_transfer.decode"]
    assert (e.state, e.points_at, e.worker) == (FIRED, "decode_transfer", "decode")
    assert [(c.source, c.series, c.value) for c in e.cites] == [("decode", FAILED, 3.0)]


def test_a_source_that_did_not_answer_is_unknown_with_its_reason_never_quiet() -> None:
    run = _clean(decode=_silent("decode"), router=_silent("router", "router"))
    got = _by_rule(assess(_view(run)))
    for key in ("engine_transfer.decode", "router_errors.router", "engine_saturation.decode"):
        e = got[f"telemetry.{key}"]
        assert (e.state, e.why, e.detail) == (UNKNOWN, Unknown.SOURCE_SILENT, "connection refused")
        assert unknown_text(e) == "connection refused", e
    client = got["telemetry.client_vs_server.decodes"]
    assert (client.state, client.why, client.detail) == (UNKNOWN, Unknown.DECODES_SILENT, "decode")
    assert unknown_text(client) == "decode(s) did not answer: decode"
    obs = {o.id: o for o in telemetry_observations(tuple(got.values()))}
    assert obs["telemetry.engine_transfer.decode"].healthy is None
    assert is_unknown(obs["telemetry.engine_transfer.decode"])


#: Ten samples a second apart: the failed requests ran in seconds 6 to 8.
FAILING = ((6.0, 8.0),)
#: A queue long only while the requests failed, with the engine at its cap then.
SATURATED = dict(queue=(0, 0, 0, 0, 0, 0, 5, 8, 9, 0), running=(2, 3, 4, 4, 3, 4, 8, 8, 8, 2))


def test_a_queue_with_the_engine_at_its_cap_while_requests_failed_is_engine_saturation() -> None:
    run = _clean(decode=_engine("decode", **SATURATED))  # type: ignore[arg-type]
    e = _by_rule(assess(_view(run, failing=FAILING)))["telemetry.engine_saturation.decode"]
    assert (e.state, e.points_at, e.worker) == (FIRED, "engine_saturation", "decode")
    cites = {c.series: (c.value, c.kind) for c in e.cites}
    # failing window (samples 5 to 9): mean queue 4.4; baseline (0 to 4): 0
    assert cites["sglang:num_queue_reqs"] == (4.4, "rise")
    assert cites["sglang:num_running_reqs"] == (8.0, "last")  # the most it ran: its cap


def test_a_queue_without_the_engine_at_its_cap_or_outside_the_failing_window_is_quiet() -> None:
    below_cap = _engine("decode", queue=SATURATED["queue"], running=(2, 3, 4, 9, 3, 4, 5, 5, 5, 2))
    e = _by_rule(assess(_view(_clean(decode=below_cap), failing=FAILING)))
    assert e["telemetry.engine_saturation.decode"].state == QUIET
    # The case: the queue that rose was servelab's own replay burst (seconds 6 to 8),
    # the failure came before it; prompts that grow are not read at all.
    run = _clean(decode=_engine("decode", **SATURATED))  # type: ignore[arg-type]
    replayed = _view(run, failing=((1.0, 1.0),), replays=((5.5, 9.0),))
    assert _by_rule(assess(replayed))["telemetry.engine_saturation.decode"].state == QUIET
    # Nothing failed: nothing to explain.
    assert _by_rule(assess(_view(run)))["telemetry.engine_saturation.decode"].state == QUIET


def test_too_few_samples_leave_saturation_unknown() -> None:
    short = _clean(decode=_engine("decode", queue=(0, 9)))
    e = _by_rule(assess(_view(short, failing=((1.0, 1.0),))))["telemetry.engine_saturation.decode"]
    assert (e.state, e.why) == (UNKNOWN, Unknown.TOO_FEW_SAMPLES)
    assert unknown_text(e) == "too few samples in the failing window or the baseline"
    no_queue = replace(_engine("decode"), gauges={})
    e = _by_rule(assess(_view(_clean(decode=no_queue), failing=FAILING)))
    assert e["telemetry.engine_saturation.decode"].why == Unknown.NO_QUEUE_GAUGE
    assert unknown_text(e["telemetry.engine_saturation.decode"]) == "no queue gauge"


def test_client_and_decodes_disagreeing_beyond_the_tolerance_is_the_client() -> None:
    # The decode counted 200 tokens; the client received 140 (30% fewer > 25%).
    e = _by_rule(assess(_view(_clean(), tokens=140)))["telemetry.client_vs_server.decodes"]
    assert (e.state, e.points_at, e.threshold) == (FIRED, "client", CLIENT_TOLERANCE)
    cites = {(c.source, c.series): c.value for c in e.cites}
    assert (
        cites[("decode", "sglang:generation_tokens_total")] == 200.0
        and cites[("client", "output_tokens")] == 140.0
    )
    assert cites[("client", "relative_difference")] == 0.3
    inside = _by_rule(assess(_view(_clean(), tokens=160)))["telemetry.client_vs_server.decodes"]
    assert inside.state == QUIET  # 20% <= 25%


def test_the_client_rule_is_unknown_on_partial_counts_or_too_few_tokens() -> None:
    partial = _view(_clean(), tokens=10, complete=False)
    e = _by_rule(assess(partial))["telemetry.client_vs_server.decodes"]
    assert e.state == UNKNOWN and e.why == Unknown.CLIENT_INCOMPLETE
    assert "did not count" in unknown_text(e)
    few = _clean(decode=_engine("decode", {GEN: 50.0}))
    e = _by_rule(assess(_view(few, tokens=5)))["telemetry.client_vs_server.decodes"]
    assert e.state == UNKNOWN and e.why == Unknown.TOO_FEW_TOKENS
    assert "fewer than 100" in unknown_text(e)
    e = _by_rule(assess(ServerView(_clean(), ROLES, None)))["telemetry.client_vs_server.decodes"]
    assert e.state == UNKNOWN


# ------------------------------------------------------------------------ in the diagnosis
def test_transfer_failures_alone_give_a_decode_transfer_finding_citing_the_counter() -> None:
    ev = SoakEvidence(False, (_stall(),))
    run = _clean(decode=_engine("decode", {FAILED: 3.0}))
    found = diagnose(ev, _view(run, complete=False))
    top = found[0]
    assert (top.layer, top.worker) == ("decode_transfer", "decode"), found
    assert "telemetry.engine_transfer.decode" in top.supporting
    assert undecided(ev, found) is None


def test_server_side_faults_give_no_finding_without_a_failure_but_the_client_rule_does() -> None:
    run = _clean(decode=_engine("decode", {FAILED: 3.0}))
    assert diagnose(SoakEvidence(False), _view(run)) == []
    found = diagnose(SoakEvidence(False), _view(_clean(), tokens=100))
    assert [(f.layer, f.supporting) for f in found] == [
        ("client", ("telemetry.client_vs_server.decodes",))
    ]


def test_a_failing_router_contradicts_client_proxy_and_a_quiet_one_proves_nothing() -> None:
    ev = SoakEvidence(True, (_stall(),), (Replay(ReplayPath.FRESH_ENTRY, Outcome.OK, 200, 0.1),))
    plain = diagnose(ev)[0]
    quiet = diagnose(ev, _view(_clean()))[0]
    # A failure inside a stream passes the router as a 200: its silence supports nothing.
    assert quiet.layer == plain.layer == "client_proxy"
    assert "telemetry.router_errors.router" not in quiet.supporting
    assert quiet.confidence == plain.confidence
    errs = {'smg_worker_errors_total{error_type="backend_error",worker_type="decode"}': 4.0}
    loud = next(f for f in diagnose(ev, _view(_clean(router=_router(errs)))) if f.layer ==
                "client_proxy")  # fmt: skip
    assert "telemetry.router_errors.router" in loud.contradicting
    assert loud.confidence == round(plain.confidence - 0.2, 2)


def test_undecided_lists_the_telemetry_sources_that_stayed_unknown() -> None:
    ev = SoakEvidence(False, (_stall(),))
    run = _clean(decode=_silent("decode"))
    view = _view(run, complete=False)
    why = undecided(ev, diagnose(ev, view), view)
    assert why is not None
    assert "telemetry.engine_transfer.decode" in why.unknown
