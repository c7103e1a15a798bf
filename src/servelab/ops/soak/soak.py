"""The multi-round agentic soak: sessions, failure detection, and automatic localization.

Each session is one :class:`~servelab.core.soak.agentic.Conversation` driven through the entry point
on its own :class:`~servelab.io.http.stream.StreamClient` (one keep-alive connection,
``concurrency=1``; ``connection="fresh"`` closes it after every request; its connections traced). A
request that gets no byte for ``idle_timeout_s`` (the client's idle watchdog, head included) is a
stall (the one rule: :func:`servelab.core.soak.signatures.stall`); any other failure (HTTP status,
reset, KV-transfer error answer, malformed stream) an error; both get a failure signature
(:mod:`servelab.core.soak.signatures`) with the real session, round, payload size, connection age
and requests carried. Before measuring, the soak warms the engines
(:func:`~servelab.ops.soak.localize.warm_up`): a cold start is paid and recorded, never read as a
hang. Each distinct signature starts one localization (:func:`~servelab.ops.soak.localize.localize`:
the replay matrix and every other source), at most
:data:`~servelab.core.soak.signatures.MAX_LOCALIZATIONS`, within the deadline; the pure rules of
:mod:`servelab.core.soak.diagnose` turn the evidence into findings, or say why there is none. Ctrl-C
(cancellation) and the deadline end the soak with the partial result, recorded like a full one.
What the run sees is tallied as it goes and concluded once, at the end, into the one frozen
:class:`~servelab.core.soak.result.SoakResult` that the ledger stores and report words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from servelab.core.ledger.codec import JsonObject
from servelab.core.load.metrics import SloAttainment, slo_attainment
from servelab.core.soak.agentic import (
    Conversation,
    check_answer,
    compare_texts,
    greedy_probe_body,
    payload_size,
)
from servelab.core.soak.events import (
    EnginesStarted,
    RequestResent,
    SoakDeadlineReached,
    SoakStarted,
    StallSeen,
    StreamHeld,
)
from servelab.core.soak.evidence import CorrectnessIssue, Localization, MaskedResend, Stall
from servelab.core.soak.result import (
    Determinism,
    FailedRequest,
    SoakClient,
    SoakConfig,
    SoakResult,
    SoakSessions,
    SoakTraces,
    Targets,
)
from servelab.core.soak.signatures import Failure, Outcome, Signature, classify, to_localize
from servelab.core.telemetry.rules import ClientWindow, ServerView
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.summary import MetricsSource, RunTelemetry, instance_of
from servelab.core.telemetry.traces import RequestPhases
from servelab.core.verify.coldstart import StartClass
from servelab.io.http.client import HttpClient
from servelab.io.http.models import listed_model
from servelab.io.http.sdk import SdkClient
from servelab.io.http.stream import StreamClient
from servelab.io.ledger.ledger import Ledger
from servelab.ops.context import Progress, silent
from servelab.ops.soak.answers import SoakProbes
from servelab.ops.soak.client import Exchange, client, exchange, one_shot
from servelab.ops.soak.localize import discover_workers, localize, warm_up
from servelab.ops.soak.replay import holds
from servelab.ops.soak.sessions import SessionTally, decode_rate, uncached
from servelab.ops.soak.traces import FailedId, gather_soak_spans, request_phases
from servelab.ops.soak.verdict import Seen, conclude
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.ops.telemetry.watch import MetricsWatch

__all__ = ["metric_sources", "soak"]


# ------------------------------------------------------------------------------------ sessions
@dataclass(frozen=True)
class _Sent:
    """One of the soak's requests as it went: its body and round, the requests in flight with
    it (itself included), its connection's age, the requests it carried before and how long it
    sat idle, and when it was sent and ended (monotonic)."""

    body: JsonObject
    round: int
    in_flight: int = 1
    conn: tuple[float, int, float] = (0.0, 0, 0.0)
    window: tuple[float, float] = (0.0, 0.0)


@dataclass
class _Run:
    """Shared state of one soak run: what it has seen so far (the result is made of it at the
    end, :func:`_result`)."""

    config: SoakConfig
    targets: Targets
    progress: Progress
    http: HttpClient = field(default_factory=HttpClient)  # probes, scrapes, lookups (not streams)
    model: str = ""
    sessions: list[SessionTally] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    errors: list[FailedRequest] = field(default_factory=list)
    correctness: list[CorrectnessIssue] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    localizations: list[Localization] = field(default_factory=list)
    determinism: Determinism = field(default_factory=Determinism)
    start: StartClass | None = None
    deadline_hit: bool = False
    inflight: int = 0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)  # the sessions
    locators: list[asyncio.Task[None]] = field(default_factory=list)
    signatures: list[Signature] = field(default_factory=list)  # localized (or being localized)
    deadline: float = 0.0  # when localizations must be over (monotonic)
    output_tokens: int = 0  # received by the sessions and the probes
    failed_ids: list[FailedId] = field(default_factory=list)  # stalled or failed, by request id
    resends: list[MaskedResend] = field(default_factory=list)
    router_echoes: bool = False  # an answer through the entry carried its own request id back
    failing: list[tuple[float, float]] = field(default_factory=list)  # failed requests (monotonic)
    replays: list[tuple[float, float]] = field(default_factory=list)  # localizations (monotonic)
    traffic_done: asyncio.Event = field(default_factory=asyncio.Event)
    one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock)  # the localizations
    sample: tuple[int, int, JsonObject] | None = None  # the largest payload answered
    probes: SoakProbes | None = None  # the answer probes (set once the model is known)

    def tally(self, ex: Exchange) -> None:
        """Count what one of the soak's own requests received (for the client-vs-server rule)."""
        self.output_tokens += ex.record.output_tokens

    @property
    def active(self) -> bool:
        return any(not task.done() for task in self.tasks)


def _session_client(run: _Run) -> StreamClient | SdkClient:
    """The client one session sends through (:class:`~servelab.core.soak.result.SoakClient`)."""
    cfg = run.config
    url, idle = run.targets.entry_url, cfg.idle_timeout_s
    if cfg.client == SoakClient.OPENAI:
        proxy = run.targets.proxy
        return SdkClient(url, idle_timeout_s=idle, headers=dict(cfg.headers), proxy=proxy)
    fresh, resend = cfg.connection == "fresh", cfg.client == SoakClient.SERVELAB
    return client(
        url, idle, fresh=fresh, headers=cfg.headers, resend=resend, proxy=run.targets.proxy
    )


def _connection(c: StreamClient | SdkClient, rnd: int) -> tuple[float, int, float]:
    """The request's connection: its age, the requests it carried before, its idle time (the
    SDK's pool is not seen: the session's own requests before, and its idle time)."""
    if isinstance(c, SdkClient):
        return 0.0, rnd, c.last_idle_s
    conns = c.connections
    assert conns is not None
    return conns.age_s(), conns.carried, conns.idle_s


async def _session(run: _Run, tally: SessionTally) -> None:
    cfg = run.config
    conv = Conversation(
        tally.session, seed=cfg.seed, turn_words=cfg.turn_words, fresh=cfg.fresh_context
    )
    session_client = _session_client(run)
    async with session_client:
        for rnd in range(cfg.rounds):
            body = conv.request_body(model=run.model, max_tokens=cfg.max_tokens)
            raw = json.dumps(body).encode()
            run.inflight += 1
            in_flight, sent_at = run.inflight, time.monotonic()
            try:
                ex = await exchange(session_client, raw, rnd)
            finally:
                run.inflight -= 1
                tally.requests += 1
            tally.records.append(ex.record)
            conn = _connection(session_client, rnd)
            if isinstance(session_client, StreamClient) and session_client.connections:
                tally.connections = session_client.connections.opened
            sent = _Sent(body, rnd, in_flight, conn, (sent_at, time.monotonic()))
            if not _account(run, tally, sent, ex):
                return
            conv.add_answer(ex.answer)
            tally.rounds_done += 1
            if cfg.think_time_s:
                await asyncio.sleep(cfg.think_time_s)


def _account(run: _Run, tally: SessionTally, sent: _Sent, ex: Exchange) -> bool:
    """Book one exchange into the run; False when the session cannot go on."""
    record, rnd, body = ex.record, ex.record.index, sent.body
    run.tally(ex)
    _masked(run, tally.session, sent, ex)
    for v in check_answer(ex.answer):
        run.correctness.append(CorrectnessIssue(v.kind, tally.session, rnd, v.detail))
        size, (age, carried, _) = payload_size(body), sent.conn
        _fail(run, Failure(Signature.CORRECTNESS, tally.session, rnd, size, age, carried), body)
    if ex.stalled:
        _note_stall(run, tally.session, sent, ex)
        tally.stalled = True
        return False
    if not record.ok:
        tally.error = f"{record.error}: {record.error_detail}"[:300]
        run.failed_ids.append(FailedId(record.request_id, tally.session, rnd, Outcome.ERROR))
        detail = record.error_detail[:300]
        run.errors.append(FailedRequest(tally.session, rnd, record.status, record.error, detail))
        run.failing.append(sent.window)
        _fail(run, _failure(tally.session, sent, ex), body)
        return False
    run.router_echoes = run.router_echoes or ex.echoed_id is True
    size = payload_size(body)
    if run.sample is None or payload_size(run.sample[2]) < size:
        run.sample = (tally.session, rnd, body)
    return True


def _masked(run: _Run, session: int, sent: _Sent, ex: Exchange) -> None:
    """Keep every resend the client made; from the second on they are a failure (localized
    once, like any other signature)."""
    for r in ex.resends:
        run.resends.append(
            MaskedResend(session, sent.round, r.idle_s, r.before_send, status=r.status)
        )
        run.progress(RequestResent(session, sent.round))
    if ex.resends and len(run.resends) >= 2:
        age, carried, _ = sent.conn
        last, size = ex.resends[-1], payload_size(sent.body)
        if last.status is None:  # the server closed the connection: replayed on a reused one
            failure = Failure(
                Signature.RESENT, session, sent.round, size, age, max(1, carried),
                idle_s=last.idle_s, in_flight=sent.in_flight,
            )  # fmt: skip
        else:  # a retry after an answer: that answer is the failure, replayed as sent
            failure = Failure(Signature.RESENT, session, sent.round, size, age, 0,
                              status=last.status, in_flight=sent.in_flight)  # fmt: skip
        _fail(run, failure, sent.body)


def _failure(session: int, sent: _Sent, ex: Exchange) -> Failure:
    rec = ex.record
    sig = classify(rec.status, rec.error, rec.error_detail, ex.phase) or Signature.MALFORMED
    age, carried, idle = sent.conn
    detail = rec.error_detail[:300]
    return Failure(
        sig, session, sent.round, payload_size(sent.body), round(age, 3), carried, rec.status,
        rec.error or "", detail, ex.received_bytes, ex.phase, round(idle, 1), sent.in_flight,
        ex.server, ex.echoed_id,
    )  # fmt: skip


def _note_stall(run: _Run, session: int, sent: _Sent, ex: Exchange) -> None:
    """Record a stall (session -1: the C1 probe) and localize its signature once."""
    size, received = payload_size(sent.body), (ex.received_bytes, ex.received_events, ex.phase)
    rnd = sent.round
    run.failed_ids.append(FailedId(ex.record.request_id, session, rnd, Outcome.STALLED))
    age, carried, _ = sent.conn
    run.stalls.append(
        Stall(session, rnd, size, round(age, 3), carried, *received, ex.record.error or "")
    )
    run.failing.append(sent.window)
    run.progress(StallSeen(session, rnd, carried, size, ex.phase))
    _fail(run, _failure(session, sent, ex), sent.body)


def _fail(run: _Run, failure: Failure, body: JsonObject) -> None:
    """Keep the failure; start a localization when its signature is new and the budget lasts."""
    run.failures.append(failure)
    if not run.config.localize or not to_localize([failure], run.signatures):
        return
    run.signatures.append(failure.signature)
    run.locators.append(asyncio.create_task(_localize(run, failure, body)))


async def _localize(run: _Run, failure: Failure, body: JsonObject) -> None:
    """One localization, once the sessions' traffic is over and one at a time (its replays then
    meet only the load they send themselves), within the deadline; its span is kept (a replay
    window)."""
    await run.traffic_done.wait()
    async with run.one_at_a_time:
        left = run.deadline - time.monotonic()
        if left <= 0:
            return
        start = time.monotonic()
        try:
            async with asyncio.timeout(left):
                found = await localize(
                    run.targets,
                    failure,
                    body,
                    model=run.model,
                    idle_timeout_s=run.config.idle_timeout_s,
                    progress=run.progress,
                    http=run.http,
                    deadline=run.deadline,
                    headers=run.config.headers,
                    rate=decode_rate(run.sessions),
                )
        finally:
            run.replays.append((start, time.monotonic()))
    run.localizations.append(found)


async def _hold_check(run: _Run) -> None:
    """Through a proxy, the largest payload answered is sent once straight to the router and once
    through the entry, one after the other: a stream the entry holds (its first token or a gap
    far later) is a failure of its own (:attr:`Signature.HELD`), localized like the others."""
    t, cfg = run.targets, run.config
    if not (t.via_proxy and t.router_url and cfg.localize and run.sample):
        return
    fits = time.monotonic() + cfg.deadlines.hold_check_s <= run.deadline
    if Signature.HELD in run.signatures or not fits:
        return
    session, rnd, body = run.sample
    start = time.monotonic()
    try:
        found = await holds(t, body, idle_s=cfg.idle_timeout_s, headers=cfg.headers)
    finally:
        run.replays.append((start, time.monotonic()))
    if found:
        run.progress(StreamHeld(session, rnd))
        held = Failure(Signature.HELD, session, rnd, payload_size(body), 0.0, 0)
        _fail(run, held, body)


# ---------------------------------------------------------------------------------- determinism
def _probe_body(run: _Run) -> JsonObject:
    return greedy_probe_body(
        model=run.model, max_tokens=run.config.max_tokens, seed=run.config.seed
    )


async def _reference(run: _Run) -> str | None:
    """The greedy probe at concurrency 1, before any session starts."""
    body = _probe_body(run)
    start = time.monotonic()
    t, cfg = run.targets, run.config
    ref = await one_shot(t.entry_url, body, cfg.idle_timeout_s, cfg.headers, t.proxy)
    run.tally(ref)
    run.determinism = Determinism(reference_ok=ref.record.ok)
    if ref.stalled:
        _note_stall(run, -1, _Sent(body, -1, window=(start, time.monotonic())), ref)
    return ref.answer.text if ref.record.ok else None


async def _under_load(run: _Run, reference: str) -> None:
    """The same greedy probe again once the sessions have requests in flight."""
    cfg = run.config
    want = min(cfg.sessions, max(2, cfg.sessions // 2))
    give_up = time.monotonic() + cfg.duration_s / 2
    while run.inflight < want and run.active and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    if not run.active:
        run.determinism = replace(run.determinism, sessions_ended_first=True)
        return
    concurrency = run.inflight + 1
    loaded = await one_shot(
        run.targets.entry_url, _probe_body(run), cfg.idle_timeout_s, cfg.headers, run.targets.proxy
    )
    run.tally(loaded)
    run.determinism = replace(
        run.determinism, under_load_ok=loaded.record.ok, concurrency=concurrency
    )
    if not loaded.record.ok:
        return
    violation = compare_texts(reference, loaded.answer.text)
    run.determinism = replace(run.determinism, same_text=violation is None)
    if violation is not None:
        run.correctness.append(CorrectnessIssue(violation.kind, -1, -1, violation.detail))
        body = _probe_body(run)
        _fail(run, Failure(Signature.CORRECTNESS, -1, -1, payload_size(body), 0.0, 0), body)


# ---------------------------------------------------------------------------------------- soak
async def _traffic(run: _Run, reference: str | None) -> None:
    async with asyncio.TaskGroup() as group:
        run.tasks = [group.create_task(_session(run, s)) for s in run.sessions]
        if reference is not None:
            group.create_task(_under_load(run, reference))
        if run.probes is not None:
            group.create_task(run.probes.under_load(lambda: run.inflight, lambda: run.active))


async def _drive(run: _Run, hard_deadline: float) -> None:
    cfg = run.config
    run.sessions = [SessionTally(i) for i in range(cfg.sessions)]
    run.deadline = hard_deadline - 0.2
    try:
        reference = await _reference(run) if cfg.check_determinism else None
        if run.probes is not None:
            await run.probes.before()
        traffic_end = hard_deadline - (cfg.deadlines.reserve_s if cfg.localize else 0.0)
        try:
            async with asyncio.timeout(max(0.1, traffic_end - time.monotonic())):
                await _traffic(run, reference)
        except TimeoutError:
            run.deadline_hit = True
            run.progress(SoakDeadlineReached())
        await _hold_check(run)
        run.output_tokens += run.probes.tokens if run.probes is not None else 0
        for issue, body in run.probes.issues() if run.probes is not None else []:
            run.correctness.append(issue)
            _fail(run, Failure(Signature.CORRECTNESS, issue.session, issue.round, 0, 0.0, 0),
                  json.loads(body))  # fmt: skip
        run.traffic_done.set()
        await asyncio.gather(*run.locators, return_exceptions=True)
    finally:
        run.traffic_done.set()
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
    probe_s = cfg.deadlines.probe_s
    headers = dict(cfg.headers)
    # through a proxy (forward or in front of the router), the model is asked of the router
    # straight: the sessions take the proxy, and a failure there is theirs to meet
    ask = targets.router_url or targets.entry_url
    run.model = cfg.model or await listed_model(run.http, ask, probe_s, headers)
    if run.probes is not None:
        run.probes.model, run.probes.targets = run.model, run.targets
    run.targets = await _resolve_targets(run, probe_s)
    if cfg.warm_up and (run.targets.workers or run.targets.router_url):
        bound = cfg.deadlines.warm_up_s
        run.start = await warm_up(
            run.http, run.targets, run.model, bound_s=bound, idle_s=cfg.idle_timeout_s
        )
        run.progress(EnginesStarted(run.start))


def _result(
    run: _Run,
    watched: tuple[RunTelemetry | None, float],
    interrupted: bool,
    traces: SoakTraces | None,
    elapsed_s: float,
) -> SoakResult:
    """What the run saw, concluded (:func:`~servelab.ops.soak.verdict.conclude`). ``watched``:
    the run telemetry and when its watch started (monotonic: the windows' origin)."""
    telemetry, t0 = watched
    # Replays (localizations, the hold check) send traffic the client does not count, and
    # requests cut by the deadline or Ctrl-C may be generated on after the client stopped
    # reading: a partial count.
    partial = bool(run.replays) or run.deadline_hit or interrupted
    window = ClientWindow(run.output_tokens, complete=not partial)
    roles = {w.service: w.role for w in run.targets.workers}

    def since(spans: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
        return tuple((a - t0, b - t0) for a, b in spans)

    view = ServerView(telemetry, roles, window, since(run.failing), since(run.replays))
    seen = Seen(
        run.targets.via_proxy, run.start, run.stalls, run.failures, run.correctness,
        run.localizations, view, run.resends, run.router_echoes,
    )  # fmt: skip
    verdict = conclude(seen)
    return SoakResult(
        run.config,
        run.targets,
        model=run.model,
        elapsed_s=round(elapsed_s, 3),
        interrupted=interrupted,
        deadline_hit=run.deadline_hit,
        sessions=SoakSessions.of([s.outcome() for s in run.sessions], run.config.rounds),
        stalls=tuple(run.stalls),
        errors=tuple(run.errors),
        correctness=tuple(run.correctness),
        determinism=run.determinism,
        localized=bool(run.localizations),
        observations=tuple(verdict.observations),
        findings=tuple(verdict.findings),
        failures=tuple(run.failures),
        localizations=tuple(run.localizations),
        start=run.start,
        undecided=verdict.undecided,
        dropped=tuple(verdict.dropped),
        exonerated=tuple(verdict.exonerated),
        uncached=uncached(run.sessions),
        resends=tuple(run.resends),
        telemetry=telemetry,
        traces=traces,
        slo=_judged(run),
    )


def _judged(run: _Run) -> SloAttainment | None:
    """Every session's requests against the config's SLO (None: no SLO)."""
    slo = run.config.slo
    records = [r for s in run.sessions for r in s.records]
    return None if slo is None else slo_attainment(records, slo)


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
            entry = run.targets.entry_url
            run.progress(SoakStarted(config.sessions, config.rounds, entry, config.connection))
            await _drive(run, hard_deadline)
    except TimeoutError:
        run.deadline_hit = True


async def soak(
    config: SoakConfig,
    targets: Targets,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
    case_id: int | None = None,
    on_result: Callable[[SoakResult], None] | None = None,
    traces: TraceCollector | None = None,
) -> SoakResult:
    """Run the soak until every session is done, the deadline passes, or it is cancelled.

    Once it ends (also when Ctrl-C cancels it; then it re-raises), the result is recorded in
    ``ledger`` (``soak_id`` set; attached to ``case_id`` as evidence), then ``on_result`` is
    called with the final or partial result. With ``traces`` (not yet entered), its receiver
    listens for the whole soak; the spans received are recorded with the soak, and the result
    keeps their count and each failed request's phases so far (``result.traces``).
    """
    start = time.monotonic()
    hard_deadline = start + config.duration_s
    run = _Run(config, targets, progress or silent)
    run.probes = SoakProbes(config, targets, "", ledger)
    watch = MetricsWatch(metric_sources(targets), timeout_s=config.deadlines.scrape_s)
    spans: tuple[Span, ...] = ()
    phases: tuple[RequestPhases, ...] | None = None
    interrupted = False
    watch_t0 = time.monotonic()
    try:
        async with contextlib.AsyncExitStack() as stack:
            if traces is not None:
                await stack.enter_async_context(traces)
            watch_t0 = time.monotonic()  # the watch's own start, a moment later
            async with watch:
                await _run_until_deadline(run, hard_deadline)
            if traces is not None:
                got, phases = await gather_soak_spans(traces, run.failed_ids, hard_deadline)
                spans = tuple(got)
    except (asyncio.CancelledError, Exception):
        interrupted = True  # cut short (a signal, or an error such as no model listed): never ok
        raise
    finally:
        await run.http.aclose()
        if traces is not None and phases is None:  # cut short: what came, no wait
            spans = tuple(traces.take())
            phases = request_phases(run.failed_ids, spans)
        traced = None if phases is None else SoakTraces(len(spans), phases)
        watched = (watch.result, watch_t0)
        result = _result(run, watched, interrupted, traced, time.monotonic() - start)
        if ledger is not None:
            soak_id = ledger.record_soak(result, case_id=case_id, spans=spans)
            result = replace(result, soak_id=soak_id)
        if on_result is not None:
            on_result(result)
    return result
