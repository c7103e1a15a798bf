"""The multi-round agentic soak: sessions, failure detection, and automatic localization.

Each session is one :class:`~servelab.core.soak.agentic.Conversation` driven through the entry point
on its own :class:`~servelab.io.http.client.StreamClient` (one keep-alive connection,
``concurrency=1``; ``connection="fresh"`` closes it after every request; its connections traced). A
request that gets no byte for ``idle_timeout_s`` (the client's idle watchdog, head included) is a
stall; any other failure (HTTP status, reset, KV-transfer error answer, malformed stream) an error;
both get a failure signature (:mod:`servelab.core.soak.signatures`) with the real session, round,
payload size, connection age and requests carried. Before measuring, the soak warms the engines
(:func:`~servelab.ops.soak.localize.warm_up`): a cold start is paid and recorded, never read as a
hang. Each distinct signature starts one localization (:func:`~servelab.ops.soak.localize.localize`:
the replay matrix and every other source), at most
:data:`~servelab.core.soak.signatures.MAX_LOCALIZATIONS`, within the deadline; the pure rules of
:mod:`servelab.core.soak.diagnose` turn the evidence into findings, or say why there is none. Ctrl-C
(cancellation) and the deadline end the soak with the partial result, recorded like a full one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.ledger.results import Determinism, FailedRequest, SoakDocument
from servelab.core.soak.agentic import (
    Conversation,
    check_answer,
    compare_texts,
    greedy_probe_body,
    payload_size,
)
from servelab.core.soak.diagnose import (
    CorrectnessIssue,
    Finding,
    Observation,
    Stall,
    Undecided,
)
from servelab.core.soak.observe import Localization
from servelab.core.soak.signatures import CORRECTNESS, Failure, classify, to_localize
from servelab.core.telemetry.rules import ClientWindow, ServerView
from servelab.core.telemetry.summary import MetricsSource, RunTelemetry, instance_of
from servelab.core.telemetry.traces import RequestPhases, Span
from servelab.core.verify.coldstart import StartClass
from servelab.io.http.client import HttpClient
from servelab.io.ledger.ledger import Ledger
from servelab.ops.soak.client import Exchange, Targets, WorkerTarget, client, exchange, one_shot
from servelab.ops.soak.localize import discover_workers, localize, warm_up
from servelab.ops.soak.traces import FailedId, gather_soak_spans, request_phases
from servelab.ops.soak.verdict import Seen, conclude
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.ops.telemetry.watch import MetricsWatch

__all__ = [
    "Exchange",
    "SessionOutcome",
    "SoakConfig",
    "SoakResult",
    "Targets",
    "WorkerTarget",
    "discover_workers",
    "localize",
    "soak",
]

#: The soak's progress lines (worded here: the soak's progress is not typed yet).
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SoakConfig:
    """How hard and how long to soak. ``seed`` makes the traffic reproducible."""

    sessions: int = 4
    rounds: int = 6
    think_time_s: float = 0.0
    connection: str = "reuse"  # "reuse" | "fresh"
    duration_s: float = 300.0
    idle_timeout_s: float = 30.0
    max_tokens: int = 24
    turn_words: int = 48
    seed: int = 0
    model: str | None = None
    localize: bool = True
    check_determinism: bool = True
    #: Warm the engines (and record whether they were cold) before measuring.
    warm_up: bool = True
    #: What the deployment ran with, ``{"service/NAME": value}`` (recorded, not acted on): a case
    #: reads it to tell whether a soak failed with a knob and passed without it.
    knobs: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.rounds < 1:
            raise ValueError("sessions and rounds must be ≥ 1")
        if self.connection not in ("reuse", "fresh"):
            raise ValueError(f"connection must be 'reuse' or 'fresh', got {self.connection!r}")
        if self.duration_s <= 0 or self.idle_timeout_s <= 0 or self.think_time_s < 0:
            raise ValueError("duration and idle timeout must be > 0, think time ≥ 0")


@dataclass
class SessionOutcome:
    """What one session did: rounds completed, whether it stalled, its errors."""

    session: int
    rounds_done: int = 0
    requests: int = 0
    connections: int = 0
    stalled: bool = False
    error: str | None = None


@dataclass
class SoakResult:
    """The soak's result (partial when interrupted or cut by the deadline).

    ``failures`` every failed request with its signature; ``localizations`` one per distinct
    signature localized; ``start`` whether the engines were cold (None: no warm-up ran);
    ``undecided`` why failures gave no finding.
    """

    config: SoakConfig
    targets: Targets
    model: str = ""
    elapsed_s: float = 0.0
    sessions: list[SessionOutcome] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    errors: list[FailedRequest] = field(default_factory=list)
    issues: list[CorrectnessIssue] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    localized: bool = False
    deadline_hit: bool = False
    interrupted: bool = False
    determinism: Determinism = field(default_factory=Determinism)
    soak_id: int | None = None  # set by whoever records the result in the ledger
    failures: list[Failure] = field(default_factory=list)
    localizations: list[Localization] = field(default_factory=list)
    start: StartClass | None = None
    undecided: Undecided | None = None
    #: the router's and the engines' metrics over the soak (ops/telemetry/watch.py)
    telemetry: RunTelemetry | None = None
    #: what the soak's own requests received over the same window (sessions and probes)
    client: ClientWindow | None = None
    #: every span received over the soak (tracing on; recorded in the ledger with it)
    spans: tuple[Span, ...] = ()
    #: per failed or stalled request, the worker phases its spans reached (None: tracing off)
    phases: tuple[RequestPhases, ...] | None = None

    @property
    def ok(self) -> bool:
        """No stall, no failed request, no correctness issue, no finding, not interrupted."""
        clean = not (self.stalls or self.errors or self.issues or self.findings)
        return clean and not self.interrupted


# ------------------------------------------------------------------------------------ sessions
@dataclass
class _Run:
    """Shared state of one soak run."""

    config: SoakConfig
    targets: Targets
    result: SoakResult
    progress: Progress
    http: HttpClient = field(default_factory=HttpClient)  # probes, scrapes, lookups (not streams)
    inflight: int = 0
    sessions: list[asyncio.Task[None]] = field(default_factory=list)
    locators: list[asyncio.Task[None]] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # localized (or being localized)
    deadline: float = 0.0  # when localizations must be over (monotonic)
    t0_ns: int = field(default_factory=time.perf_counter_ns)
    output_tokens: int = 0  # received by the sessions and the probes
    ttfts: list[tuple[float, float]] = field(default_factory=list)  # (sent after t0 s, TTFT s)
    failed_ids: list[FailedId] = field(default_factory=list)  # stalled or failed, by request id

    def tally(self, ex: Exchange) -> None:
        """Count what one of the soak's own requests received (for the client-vs-server rule)."""
        rec = ex.record
        self.output_tokens += rec.output_tokens
        if rec.event_ns and rec.sent_ns:
            at = (rec.sent_ns - self.t0_ns) / 1e9
            self.ttfts.append((at, (rec.event_ns[0] - rec.sent_ns) / 1e9))

    @property
    def active(self) -> bool:
        return any(not task.done() for task in self.sessions)


async def _session(run: _Run, outcome: SessionOutcome) -> None:
    cfg = run.config
    conv = Conversation(outcome.session, seed=cfg.seed, turn_words=cfg.turn_words)
    session_client = client(
        run.targets.entry_url, cfg.idle_timeout_s, fresh=cfg.connection == "fresh"
    )
    assert session_client.connections is not None
    async with session_client:
        for rnd in range(cfg.rounds):
            body = conv.request_body(model=run.result.model, max_tokens=cfg.max_tokens)
            raw = json.dumps(body).encode()
            run.inflight += 1
            try:
                ex = await exchange(session_client, raw, rnd)
            finally:
                run.inflight -= 1
                outcome.requests += 1
            conns = session_client.connections
            outcome.connections = conns.opened
            if not _account(run, outcome, (conns.age_s(), conns.carried), ex, body):
                return
            conv.add_answer(ex.answer)
            outcome.rounds_done += 1
            if cfg.think_time_s:
                await asyncio.sleep(cfg.think_time_s)


def _account(
    run: _Run,
    outcome: SessionOutcome,
    conn: tuple[float, int],
    ex: Exchange,
    body: dict[str, Any],
) -> bool:
    """Book one exchange into the result; False when the session cannot go on."""
    result, record, rnd = run.result, ex.record, ex.record.index
    run.tally(ex)
    for v in check_answer(ex.answer):
        result.issues.append(CorrectnessIssue(v.kind, outcome.session, rnd, v.detail))
        _fail(run, Failure(CORRECTNESS, outcome.session, rnd, payload_size(body), *conn), body)
    if ex.stalled:
        _note_stall(run, outcome.session, rnd, body, ex, conn)
        outcome.stalled = True
        return False
    if not record.ok:
        outcome.error = f"{record.error}: {record.error_detail}"[:300]
        run.failed_ids.append(FailedId(record.request_id, outcome.session, rnd, "error"))
        detail = record.error_detail[:300]
        result.errors.append(
            FailedRequest(outcome.session, rnd, record.status, record.error, detail)
        )
        _fail(run, _failure(outcome.session, rnd, body, ex, conn), body)
        return False
    return True


def _failure(
    session: int, rnd: int, body: dict[str, Any], ex: Exchange, conn: tuple[float, int]
) -> Failure:
    rec = ex.record
    sig = classify(rec.status, rec.error, rec.error_detail, ex.phase) or "malformed"
    age, carried = round(conn[0], 3), conn[1]
    detail = rec.error_detail[:300]
    return Failure(
        sig, session, rnd, payload_size(body), age, carried, rec.status, rec.error or "", detail,
        ex.received_bytes, ex.phase,
    )  # fmt: skip


def _note_stall(
    run: _Run, session: int, rnd: int, body: dict[str, Any], ex: Exchange, conn: tuple[float, int]
) -> None:
    """Record a stall (session -1: the C1 probe) and localize its signature once."""
    size, received = payload_size(body), (ex.received_bytes, ex.received_events, ex.phase)
    run.failed_ids.append(FailedId(ex.record.request_id, session, rnd, "stalled"))
    age, carried = round(conn[0], 3), conn[1]
    run.result.stalls.append(
        Stall(session, rnd, size, age, carried, *received, ex.record.error or "")
    )
    run.progress(
        f"stall: session {session} round {rnd} after {carried} requests on its "
        f"connection ({size} B payload, phase {ex.phase})"
    )
    _fail(run, _failure(session, rnd, body, ex, conn), body)


def _fail(run: _Run, failure: Failure, body: dict[str, Any]) -> None:
    """Keep the failure; start a localization when its signature is new and the budget lasts."""
    run.result.failures.append(failure)
    if not run.config.localize or not to_localize([failure], run.signatures):
        return
    run.signatures.append(failure.signature)
    run.locators.append(asyncio.create_task(_localize(run, failure, body)))


async def _localize(run: _Run, failure: Failure, body: dict[str, Any]) -> None:
    left = run.deadline - time.monotonic()
    if left <= 0:
        return
    async with asyncio.timeout(left):
        found = await localize(
            run.targets,
            failure,
            body,
            model=run.result.model,
            idle_timeout_s=run.config.idle_timeout_s,
            progress=run.progress,
            http=run.http,
            deadline=run.deadline,
        )
    run.result.localizations.append(found)
    run.result.localized = True


# ---------------------------------------------------------------------------------- determinism
def _probe_body(run: _Run) -> dict[str, Any]:
    return greedy_probe_body(
        model=run.result.model, max_tokens=run.config.max_tokens, seed=run.config.seed
    )


async def _reference(run: _Run) -> str | None:
    """The greedy probe at concurrency 1, before any session starts."""
    body = _probe_body(run)
    ref = await one_shot(run.targets.entry_url, body, run.config.idle_timeout_s)
    run.tally(ref)
    run.result.determinism = Determinism(reference_ok=ref.record.ok)
    if ref.stalled:
        _note_stall(run, -1, -1, body, ref, (0.0, 0))
    return ref.answer.text if ref.record.ok else None


async def _under_load(run: _Run, reference: str) -> None:
    """The same greedy probe again once the sessions have requests in flight."""
    cfg = run.config
    want = min(cfg.sessions, max(2, cfg.sessions // 2))
    give_up = time.monotonic() + cfg.duration_s / 2
    while run.inflight < want and run.active and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    if not run.active:
        run.result.determinism = replace(run.result.determinism, sessions_ended_first=True)
        return
    concurrency = run.inflight + 1
    loaded = await one_shot(run.targets.entry_url, _probe_body(run), cfg.idle_timeout_s)
    run.tally(loaded)
    run.result.determinism = replace(
        run.result.determinism, under_load_ok=loaded.record.ok, concurrency=concurrency
    )
    if not loaded.record.ok:
        return
    violation = compare_texts(reference, loaded.answer.text)
    run.result.determinism = replace(run.result.determinism, same_text=violation is None)
    if violation is not None:
        run.result.issues.append(CorrectnessIssue(violation.kind, -1, -1, violation.detail))
        body = _probe_body(run)
        _fail(run, Failure(CORRECTNESS, -1, -1, payload_size(body), 0.0, 0), body)


# ---------------------------------------------------------------------------------------- soak
def _localize_reserve(cfg: SoakConfig) -> float:
    """Time kept after the traffic for the localizations (the matrix's cells run concurrently,
    then a reused-connection replay, then two probe rounds and two scrapes)."""
    return min(2 * cfg.idle_timeout_s + 4 * min(5.0, cfg.idle_timeout_s) + 1.0, cfg.duration_s / 2)


async def _traffic(run: _Run, reference: str | None) -> None:
    async with asyncio.TaskGroup() as group:
        run.sessions = [group.create_task(_session(run, o)) for o in run.result.sessions]
        if reference is not None:
            group.create_task(_under_load(run, reference))


async def _drive(run: _Run, hard_deadline: float) -> None:
    cfg = run.config
    run.result.sessions = [SessionOutcome(i) for i in range(cfg.sessions)]
    run.deadline = hard_deadline - 0.2
    try:
        reference = await _reference(run) if cfg.check_determinism else None
        traffic_end = hard_deadline - (_localize_reserve(cfg) if cfg.localize else 0.0)
        try:
            async with asyncio.timeout(max(0.1, traffic_end - time.monotonic())):
                await _traffic(run, reference)
        except TimeoutError:
            run.result.deadline_hit = True
            run.progress("deadline reached: the sessions stop here (partial results kept)")
        await asyncio.gather(*run.locators, return_exceptions=True)
    finally:
        for task in run.locators:
            task.cancel()
        await asyncio.gather(*run.locators, return_exceptions=True)


async def _resolve_targets(run: _Run, timeout: float) -> Targets:
    targets = run.targets
    if targets.workers or not targets.router_url:
        return targets
    workers = await discover_workers(targets.router_url, timeout=timeout, http=run.http)
    return replace(targets, workers=workers)


async def _prepare(run: _Run) -> None:
    """Model, workers, and the warm-up (the engines' cold start paid and recorded)."""
    cfg, targets = run.config, run.targets
    probe_s = min(5.0, cfg.idle_timeout_s)
    model = cfg.model or await run.http.model_id(targets.entry_url, probe_s)
    run.result.model = model or "default"
    run.targets = run.result.targets = await _resolve_targets(run, probe_s)
    if cfg.warm_up and (run.targets.workers or run.targets.router_url):
        bound = max(cfg.idle_timeout_s, cfg.duration_s / 4)
        run.result.start = await warm_up(
            run.http, run.targets, run.result.model, bound_s=bound, idle_s=cfg.idle_timeout_s
        )
        run.progress(f"engines were {run.result.start.start} ({run.result.start.reason})")


def _conclude(run: _Run) -> None:
    r = run.result
    # Replays (localizations) send traffic the client does not count, and requests cut by the
    # deadline or Ctrl-C may be generated on after the client stopped reading: a partial count.
    partial = bool(r.localizations) or r.deadline_hit or r.interrupted
    r.client = ClientWindow(run.output_tokens, tuple(run.ttfts), complete=not partial)
    roles = {w.service: w.role for w in r.targets.workers}
    server = ServerView(r.telemetry, roles, r.client)
    seen = Seen(
        r.targets.via_proxy, r.start, r.stalls, r.failures, r.issues, r.localizations, server
    )
    verdict = conclude(seen)
    r.observations, r.findings, r.undecided = (
        verdict.observations, verdict.findings, verdict.undecided
    )  # fmt: skip


def metric_sources(targets: Targets) -> list[MetricsSource]:
    """The soak's metrics sources: every engine's /metrics and the router's Prometheus port."""
    out = [MetricsSource(w.service, "engine", w.url + "/metrics", instance_of(w.url), w.role)
           for w in targets.workers]  # fmt: skip
    if targets.metrics_url:
        url = targets.metrics_url.rstrip("/") + "/metrics"
        out.append(MetricsSource(targets.router_service, "router", url, instance_of(url)))
    return out


async def _run_until_deadline(run: _Run, hard_deadline: float) -> None:
    config = run.config
    try:
        async with asyncio.timeout(config.duration_s):
            await _prepare(run)
            run.progress(
                f"soak: {config.sessions} sessions x {config.rounds} rounds via "
                f"{run.targets.entry_url} ({config.connection} connections)"
            )
            await _drive(run, hard_deadline)
    except TimeoutError:
        run.result.deadline_hit = True


async def soak(
    config: SoakConfig,
    targets: Targets,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
    document: Callable[[SoakResult], SoakDocument] | None = None,
    case_id: int | None = None,
    on_result: Callable[[SoakResult], None] | None = None,
    traces: TraceCollector | None = None,
) -> SoakResult:
    """Run the soak until every session is done, the deadline passes, or it is cancelled.

    Once it ends (also when Ctrl-C cancels it; then it re-raises), the result's ``document`` is
    recorded in ``ledger`` (``soak_id`` set; attached to ``case_id`` as evidence), then
    ``on_result`` is called with the final or partial result. With ``traces`` (not yet entered),
    its receiver listens for the whole soak; at the end the spans received (``result.spans``,
    recorded with the soak) and each failed request's phases so far (``result.phases``).
    """
    say = progress or (lambda _msg: None)
    start = time.monotonic()
    hard_deadline = start + config.duration_s
    result = SoakResult(config, targets)
    run = _Run(config, targets, result, say)
    watch = MetricsWatch(metric_sources(targets), timeout_s=min(2.0, config.idle_timeout_s))
    try:
        async with contextlib.AsyncExitStack() as stack:
            if traces is not None:
                await stack.enter_async_context(traces)
            async with watch:
                await _run_until_deadline(run, hard_deadline)
            if traces is not None:
                spans, result.phases = await gather_soak_spans(
                    traces, run.failed_ids, hard_deadline
                )
                result.spans = tuple(spans)
    except asyncio.CancelledError:
        result.interrupted = True
        raise
    finally:
        result.telemetry = watch.result
        await run.http.aclose()
        _conclude(run)
        if traces is not None and result.phases is None:  # cut short: what came, no wait
            result.spans = tuple(traces.take())
            result.phases = request_phases(run.failed_ids, result.spans)
        result.elapsed_s = time.monotonic() - start
        if ledger is not None and document is not None:
            result.soak_id = ledger.record_soak(
                document(result), case_id=case_id, spans=result.spans
            )
        if on_result is not None:
            on_result(result)
    return result
