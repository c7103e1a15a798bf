"""A soak result with every kind of observation in it, built by the real diagnosis from made-up
evidence (pure: no process, no network), for the tests of its storage and its words."""

from __future__ import annotations

from servelab.core.soak.clock import Clock
from servelab.core.soak.evidence import (
    CorrectnessIssue,
    EngineActivity,
    Localization,
    MaskedResend,
    Probe,
    ProbeKind,
    Stall,
)
from servelab.core.soak.finding import Finding
from servelab.core.soak.observation import Observation
from servelab.core.soak.replay import Bisection, Cell, Hop, Matrix, Payload, locate
from servelab.core.soak.result import (
    Determinism,
    FailedRequest,
    SessionOutcome,
    SoakConfig,
    SoakResult,
    SoakSessions,
    SoakTraces,
    Targets,
    WorkerTarget,
)
from servelab.core.soak.signatures import Failure, Outcome, Phase, Signature
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.router import WorkerLoad, router_metrics
from servelab.core.telemetry.rules import ClientWindow, ServerView
from servelab.core.telemetry.traces import RequestPhases
from servelab.core.verify.coldstart import Start, StartClass, StartReason
from servelab.core.verify.pair import (
    FieldRule,
    FieldVerdict,
    PairFieldCheck,
    PairReport,
    PairValue,
)
from servelab.ops.soak.verdict import Seen, conclude
from tests.support.telemetry import transfer_failure_telemetry

__all__ = ["every_kind_result", "failed_soak", "kinds"]

_OK, _STALLED, _ERROR = Outcome.OK, Outcome.STALLED, Outcome.ERROR


def _pair(payload: Payload, outcome: Outcome, size: int, side: str = "") -> Cell:
    return Cell(
        Hop.PAIR, "prefill+decode", payload, True, size, outcome, 200 if outcome == _OK else None,
        0.21, 0.1, 300, "" if outcome == _OK else "idle timeout: no bytes", side, "prefill",
        "decode",
    )  # fmt: skip


_PAGE = ("vllm_config.cache_config.block_size",)
#: a prefill and decode that disagree on the page size (verify's pair layer)
_MISMATCH = PairReport("prefill", "decode", (PairFieldCheck(
    "page_size", FieldRule.DECODE_MULTIPLE, PairValue(True, "64", *_PAGE, "cmdline"),
    PairValue(True, "32", *_PAGE), FieldVerdict.MISMATCH),))  # fmt: skip


def _localizations(failures: list[Failure]) -> list[Localization]:
    """A decode that fails a large payload straight (bisected), then the router refusing."""
    cells = (
        _pair(Payload.FAILING, _STALLED, 900, "decode"),
        _pair(Payload.MINIMAL, _OK, 200),
        Cell(Hop.ROUTER, "router", Payload.FAILING, True, 900, _STALLED, None, 2.0),
        Cell(
            Hop.FRESH,
            "entry",
            Payload.MINIMAL,
            False,
            200,
            _OK,
            200,
            0.3,
            0.3,
            120,
            clock=Clock.DEADLINE,
            deadline_s=4.5,
        ),
        Cell(
            Hop.FRESH,
            "entry",
            Payload.FAILING,
            False,
            900,
            _STALLED,
            None,
            2.0,
            clock=Clock.UNDECIDED,
        ),
    )
    steps = (_pair(Payload.BISECT, _OK, 550),)
    first = Matrix(cells, locate(cells), Bisection(Hop.PAIR, "prefill+decode", 550, 900, steps), 4)
    probes = (
        Probe("router", "router", ProbeKind.READINESS, True, 200, 0.01, "HTTP 200"),
        Probe("router", "router", ProbeKind.WORKERS, True, None, 0.02, "2 listed"),
        Probe("prefill", "prefill", ProbeKind.HEALTH, True, 200),
        Probe("decode", "decode", ProbeKind.HEALTH, True, 200),
    )
    engines = (
        EngineActivity(
            "decode", "decode",
            {"sglang:num_running_reqs": 0.0, "sglang:generation_tokens_total": 10.0,
             "sglang:num_transfer_failed_reqs_total": 0.0},
            {"sglang:num_running_reqs": 2.0, "sglang:generation_tokens_total": 10.0,
             "sglang:num_transfer_failed_reqs_total": 3.0},
            3.0,
        ),
        EngineActivity("prefill", "prefill", {}, {}, 3.0),
    )  # fmt: skip
    metrics = router_metrics(
        'smg_worker_health{worker="http://d"} 0\nsmg_worker_cb_state{worker="http://d"} 1\n'
        'smg_router_request_errors_total{error_type="timeout"} 3\n'
    )
    loads = (WorkerLoad("decode", "engine", None), WorkerLoad("decode", "router", 2.0))
    refused = (
        Cell(Hop.PAIR, "prefill+decode", Payload.FAILING, True, 800, _OK, 200, 0.1, 0.05, 300,
             prefill="prefill", decode="decode"),
        Cell(Hop.ROUTER, "router", Payload.FAILING, True, 800, _ERROR, 503, 0.1, 0.05, 20,
             "http 503: busy"),
    )  # fmt: skip
    return [
        Localization(failures[0], first, probes, engines, metrics, loads, 5.0, (_MISMATCH,)),
        Localization(failures[1], Matrix(refused, locate(refused), None, 1.0), probes[:1]),
    ]


def every_kind_result() -> SoakResult:
    """A failed soak: stalls (fresh and reused connections), a failed request (answered in front
    of the router), a resend, correctness violations, two localizations, every source (one
    unknown), run telemetry, traces."""
    stalls = (
        Stall(0, 1, 900, 0.5, 0, 0, 0, Phase.HEAD, "idle timeout"),
        Stall(1, 2, 950, 2.5, 2, 0, 0, Phase.HEAD, "idle timeout"),
    )
    failures = [
        Failure(Signature.STALL_HEAD, 0, 1, 900, 0.5, 0),
        Failure(
            Signature.HTTP_5XX,
            1,
            0,
            800,
            0.1,
            0,
            503,
            "http 503",
            "busy",
            server="nginx",
            echoed_id=False,
        ),
        Failure(Signature.CORRECTNESS, 0, 0, 700, 0.0, 0),
    ]
    issues = (
        CorrectnessIssue("tool_call_json", 0, 0, "read_file: not JSON"),
        CorrectnessIssue("nondeterministic", -1, -1, "differs at char 3"),
    )
    workers = (
        WorkerTarget("prefill", "prefill", "http://p", 8998),
        WorkerTarget("decode", "decode", "http://d"),
    )
    targets = Targets("http://proxy", "http://r", workers, "router", "http://m")
    start = StartClass(Start.COLD, StartReason.FIRST_SINCE_START, 0, 4.2, 0.1)
    locs = _localizations(failures)
    server = ServerView(transfer_failure_telemetry(), {}, ClientWindow(0))
    resends = (MaskedResend(1, 1, 2.0, True),)
    verdict = conclude(Seen(True, start, stalls, failures, issues, locs, server, resends, True))
    config = SoakConfig(sessions=2, rounds=3, knobs={"decode/K": "512"})
    sessions = [SessionOutcome(0, 1, 2, 1, True), SessionOutcome(1, 0, 1, 1, False, "http 503")]
    phases = (RequestPhases("servelab-a-0", 0, 1, "stalled", ("prefill_queue", "prefill"), 3),)
    return SoakResult(
        config, targets, "sim", 12.346, sessions=SoakSessions.of(sessions, config.rounds),
        stalls=stalls, errors=(FailedRequest(1, 0, 503, "http 503", "busy"),),
        correctness=issues, determinism=Determinism(reference_ok=True, sessions_ended_first=True),
        localized=True, observations=tuple(verdict.observations),
        findings=tuple(verdict.findings), failures=tuple(failures), localizations=tuple(locs),
        start=start, undecided=verdict.undecided, dropped=tuple(verdict.dropped),
        exonerated=tuple(verdict.exonerated), resends=resends, telemetry=server.run,
        traces=SoakTraces(5, phases),
    )  # fmt: skip


def kinds(observations: tuple[Observation, ...]) -> set[str]:
    """The kinds of observation present."""
    return {o.kind for o in observations}


def failed_soak(
    knobs: dict[str, str | None] | None = None, layers: tuple[Layer, ...] = ()
) -> SoakResult:
    """A soak that failed (a request answered 503), run with ``knobs``, with a finding of each of
    ``layers``."""
    findings = tuple(Finding(layer, 0.8, (), ()) for layer in layers)
    config = SoakConfig(knobs=knobs or {})
    failed = (FailedRequest(0, 0, 503, "http 503", "busy"),)
    return SoakResult(config, Targets("http://e"), errors=failed, findings=findings)
