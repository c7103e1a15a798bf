"""The multi-round agentic soak: sessions, stall detection, and automatic hang localization.

Each session is one :class:`~servelab.core.agentic.Conversation` driven through the entry point on
its own :class:`~servelab.io.http.StreamClient` (one keep-alive connection, ``concurrency=1``;
``connection="fresh"`` closes it after every request; its connections traced). Each answer's
stamped reads go through the sans-I/O SSE decoder into the request record
(:class:`~servelab.core.records.StreamAccumulator`) and the answer assembler. A request that gets
no byte for ``idle_timeout_s`` (the client's idle watchdog, head included) is a stall; the
whole soak ends at ``duration_s``. At the first stall the soak localizes it once (:func:`localize`);
the pure rules of :mod:`servelab.core.diagnose` turn the evidence into findings. Ctrl-C
(cancellation) and the deadline end the soak with the partial result, recorded like a full one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from time import perf_counter_ns
from typing import Any

from servelab.core.agentic import (
    Answer,
    AnswerAssembler,
    Conversation,
    check_answer,
    compare_texts,
    e2e_probe_body,
    greedy_probe_body,
    payload_size,
)
from servelab.core.diagnose import (
    CorrectnessIssue,
    EngineActivity,
    Evidence,
    Finding,
    Observation,
    Probe,
    Replay,
    Stall,
    diagnose,
    observations,
    parse_metrics,
    parse_workers,
)
from servelab.core.engines import canonical_metrics
from servelab.core.records import REASON_IDLE, RequestRecord, StreamAccumulator
from servelab.core.results import Determinism, FailedRequest, SoakDocument
from servelab.core.sse import SSEDecoder
from servelab.io.http import Connections, HttpClient, StreamClient, Transfer, using_client
from servelab.io.ledger import Ledger
from servelab.ops.context import Progress

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

_CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class WorkerTarget:
    """An engine to look at: its service name, role (prefill/decode) and base URL."""

    service: str
    role: str
    url: str


@dataclass(frozen=True)
class Targets:
    """Where the soak sends traffic and what it inspects when something stalls."""

    entry_url: str
    router_url: str | None = None
    workers: tuple[WorkerTarget, ...] = ()
    router_service: str = "router"

    @property
    def via_proxy(self) -> bool:
        router = self.router_url
        return router is not None and router.rstrip("/") != self.entry_url.rstrip("/")


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
class Exchange:
    """One request of a session: its record, the answer, what was received, where it stalled."""

    record: RequestRecord
    received_bytes: int = 0
    received_events: int = 0
    phase: str = "head"
    answer: Answer = field(default_factory=lambda: Answer(""))

    @property
    def stalled(self) -> bool:
        return self.record.error == REASON_IDLE


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
    """The soak's result (partial when interrupted or cut by the deadline)."""

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

    @property
    def ok(self) -> bool:
        """No stall, no failed request, no correctness issue, no finding, not interrupted."""
        clean = not (self.stalls or self.errors or self.issues or self.findings)
        return clean and not self.interrupted


# ----------------------------------------------------------------------------------- exchange
def _decoded(got: Transfer) -> Exchange:
    """The answer's stamped reads through the SSE decoder, the record and the answer assembler,
    exactly as if decoded on arrival: the stream's own failures (malformed, server error) come
    before a transport failure that cut it, and only a stream that ended is finished."""
    record = got.record
    ex = Exchange(record, got.received_bytes, 0, got.phase)
    if record.status is None or record.status >= 300:
        return ex
    cut = None if record.error is None else (record.error, record.error_detail)
    record.error, record.error_detail = None, ""
    decoder, acc, asm = SSEDecoder(), StreamAccumulator(record), AnswerAssembler()
    for t_ns, data in got.chunks:
        events = decoder.feed(data, t_ns)
        ex.received_events += len(events)
        acc.on_events(events)
        asm.on_events(events)
    if cut is not None:
        record.fail(*cut)
        return ex
    end_ns = record.end_ns or perf_counter_ns()
    tail = decoder.flush(end_ns)
    asm.on_events([e for e in tail if e.complete])
    acc.finish(end_ns, tail)
    ex.answer = asm.answer()
    return ex


async def _exchange(client: StreamClient, body: bytes, index: int) -> Exchange:
    """POST one streamed chat request; every failure goes into the record, nothing raises
    except cancellation (and the caller's deadline, as TimeoutError)."""
    record = RequestRecord(index=index, scheduled_ns=perf_counter_ns())
    return _decoded(await client.transfer(_CHAT, body, record))


def _client(url: str, idle_s: float, *, fresh: bool) -> StreamClient:
    """One session's client: one keep-alive connection (``fresh``: a new one per request)."""
    connect_s = min(10.0, idle_s)
    return StreamClient(
        url,
        concurrency=1,
        idle_timeout_s=idle_s,
        connect_timeout_s=connect_s,
        force_close=fresh,
        trace_connections=True,
    )


async def _one_shot(url: str, body: dict[str, Any], idle_s: float) -> Exchange:
    """One request on a brand-new connection (closed afterwards)."""
    async with _client(url, idle_s, fresh=True) as client:
        return await _exchange(client, json.dumps(body).encode(), -1)


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

    @property
    def active(self) -> bool:
        return any(not task.done() for task in self.sessions)

    first_stall: asyncio.Event = field(default_factory=asyncio.Event)
    stalled_body: dict[str, Any] | None = None
    evidence: tuple[list[Replay], list[Probe], list[EngineActivity]] = ([], [], [])


async def _session(run: _Run, outcome: SessionOutcome) -> None:
    cfg = run.config
    conv = Conversation(outcome.session, seed=cfg.seed, turn_words=cfg.turn_words)
    client = _client(run.targets.entry_url, cfg.idle_timeout_s, fresh=cfg.connection == "fresh")
    assert client.connections is not None
    async with client:
        for rnd in range(cfg.rounds):
            body = conv.request_body(model=run.result.model, max_tokens=cfg.max_tokens)
            raw = json.dumps(body).encode()
            run.inflight += 1
            try:
                ex = await _exchange(client, raw, rnd)
            finally:
                run.inflight -= 1
                outcome.requests += 1
            outcome.connections = client.connections.opened
            if not _account(run, outcome, client.connections, ex, body):
                return
            conv.add_answer(ex.answer)
            outcome.rounds_done += 1
            if cfg.think_time_s:
                await asyncio.sleep(cfg.think_time_s)


def _account(
    run: _Run, outcome: SessionOutcome, conn: Connections, ex: Exchange, body: dict[str, Any]
) -> bool:
    """Book one exchange into the result; False when the session cannot go on."""
    result, record, rnd = run.result, ex.record, ex.record.index
    for v in check_answer(ex.answer):
        result.issues.append(CorrectnessIssue(v.kind, outcome.session, rnd, v.detail))
    if ex.stalled:
        _note_stall(run, outcome.session, rnd, body, ex, conn.age_s(), conn.carried)
        outcome.stalled = True
        return False
    if not record.ok:
        outcome.error = f"{record.error}: {record.error_detail}"[:300]
        detail = record.error_detail[:300]
        result.errors.append(
            FailedRequest(outcome.session, rnd, record.status, record.error, detail)
        )
        return False
    return True


def _note_stall(
    run: _Run, session: int, rnd: int, body: dict[str, Any], ex: Exchange, age: float, carried: int
) -> None:
    """Record a stall (session -1: the C1 probe) and wake the localizer at the first one."""
    size, received = payload_size(body), (ex.received_bytes, ex.received_events, ex.phase)
    run.result.stalls.append(
        Stall(session, rnd, size, round(age, 3), carried, *received, ex.record.error or "")
    )
    run.progress(
        f"stall: session {session} round {rnd} after {carried} requests on its "
        f"connection ({size} B payload, phase {ex.phase})"
    )
    if run.stalled_body is None:
        run.stalled_body = body
        run.first_stall.set()


# -------------------------------------------------------------------------------- localization
async def discover_workers(
    router_url: str, *, timeout: float = 5.0, http: HttpClient | None = None
) -> tuple[WorkerTarget, ...]:
    """Engines behind a router, from its ``GET /workers`` (on ``http`` when given)."""
    async with using_client(http) as client:
        body = await _get_text(client, router_url.rstrip("/") + "/workers", timeout)
    pairs = parse_workers(body)
    return tuple(WorkerTarget(f"{role}{i}", role, url) for i, (role, url) in enumerate(pairs))


async def _get_text(http: HttpClient, url: str, timeout: float) -> str:
    """The whole body of ``GET url`` ("" on any failure: a missing scrape is not evidence)."""
    result = await http.probe(url, timeout=timeout, body_limit=None)
    return result.body if result.status == 200 else ""


async def _scrape(
    http: HttpClient, workers: tuple[WorkerTarget, ...], timeout: float
) -> list[dict[str, float]]:
    """Each engine's /metrics, parsed (an empty dict when it could not be read)."""
    texts = await asyncio.gather(*(_get_text(http, w.url + "/metrics", timeout) for w in workers))
    return [canonical_metrics(parse_metrics(t)) for t in texts]  # vLLM names -> SGLang's


async def _replay(path: str, url: str, body: dict[str, Any], idle_s: float) -> Replay:
    start = time.monotonic()
    ex = await _one_shot(url, body, idle_s)
    rec = ex.record
    outcome = "ok" if rec.ok else "stalled" if ex.stalled else "error"
    detail = "" if rec.ok else f"{rec.error}: {rec.error_detail}"[:200]
    return Replay(path, outcome, rec.status, time.monotonic() - start, ex.received_bytes, detail)


async def _workers_probe(http: HttpClient, targets: Targets, timeout: float) -> Probe:
    """The router's own list of workers: ok when it lists at least one prefill and one decode."""
    assert targets.router_url is not None
    start = time.monotonic()
    found = await discover_workers(targets.router_url, timeout=timeout, http=http)
    roles = sorted(w.role for w in found)
    ok = "prefill" in roles and "decode" in roles
    detail = f"{len(found)} listed ({', '.join(roles) or 'none'})"
    return Probe(
        targets.router_service, "router", "workers", ok, None, time.monotonic() - start, detail
    )


async def _probes(http: HttpClient, targets: Targets, timeout: float) -> list[Probe]:
    jobs: list[tuple[str, str, str, Any]] = []
    if targets.router_url:
        readiness = http.probe(targets.router_url + "/readiness", timeout=timeout)
        jobs.append((targets.router_service, "router", "readiness", readiness))
    for w in targets.workers:
        jobs.append((w.service, w.role, "health", http.probe(w.url + "/health", timeout=timeout)))
    results = await asyncio.gather(*(j[3] for j in jobs))
    probes = [
        Probe(s, role, kind, r.ok, r.status, r.elapsed_s, r.describe()[:200])
        for (s, role, kind, _), r in zip(jobs, results, strict=True)
    ]
    if targets.router_url:
        probes.insert(1, await _workers_probe(http, targets, timeout))
    return probes


async def localize(
    targets: Targets,
    body: dict[str, Any],
    *,
    model: str,
    idle_timeout_s: float,
    progress: Progress | None = None,
    http: HttpClient | None = None,
) -> tuple[list[Replay], list[Probe], list[EngineActivity]]:
    """Replay ``body`` fresh through the entry point and straight to the router, probe the router
    and every worker, and scrape each engine's /metrics before and after (bounded by the idle
    timeout plus a few seconds). Probes and scrapes go on ``http`` when given."""
    say = progress or (lambda _msg: None)
    say("localizing: replaying the stalled payload on a fresh connection and to the router")
    async with using_client(http) as client:
        return await _evidence(client, targets, body, model, idle_timeout_s)


async def _evidence(
    http: HttpClient, targets: Targets, body: dict[str, Any], model: str, idle_timeout_s: float
) -> tuple[list[Replay], list[Probe], list[EngineActivity]]:
    probe_s = min(5.0, idle_timeout_s)
    t0 = time.monotonic()
    before = await _scrape(http, targets.workers, probe_s)
    jobs = [_replay("fresh_entry", targets.entry_url, body, idle_timeout_s)]
    if targets.router_url:
        jobs.append(_replay("direct_router", targets.router_url, body, idle_timeout_s))
        jobs.append(_replay("e2e", targets.router_url, e2e_probe_body(model=model), idle_timeout_s))
    replays = list(await asyncio.gather(*jobs))
    probes = await _probes(http, targets, probe_s)
    after = await _scrape(http, targets.workers, probe_s)
    interval = time.monotonic() - t0
    engines = [
        EngineActivity(w.service, w.role, b, a, interval)
        for w, b, a in zip(targets.workers, before, after, strict=True)
        if b or a
    ]
    for r in (r for r in replays if r.path == "e2e"):
        e2e = (r.outcome == "ok", r.status, r.elapsed_s, r.detail or r.outcome)
        probes.append(Probe(targets.router_service, "router", "e2e", *e2e))
    return [r for r in replays if r.path != "e2e"], probes, engines


# ---------------------------------------------------------------------------------- determinism
def _probe_body(run: _Run) -> dict[str, Any]:
    return greedy_probe_body(
        model=run.result.model, max_tokens=run.config.max_tokens, seed=run.config.seed
    )


async def _reference(run: _Run) -> str | None:
    """The greedy probe at concurrency 1, before any session starts."""
    body = _probe_body(run)
    ref = await _one_shot(run.targets.entry_url, body, run.config.idle_timeout_s)
    run.result.determinism = Determinism(reference_ok=ref.record.ok)
    if ref.stalled:
        _note_stall(run, -1, -1, body, ref, 0.0, 0)
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
    loaded = await _one_shot(run.targets.entry_url, _probe_body(run), cfg.idle_timeout_s)
    run.result.determinism = replace(
        run.result.determinism, under_load_ok=loaded.record.ok, concurrency=concurrency
    )
    if not loaded.record.ok:
        return
    violation = compare_texts(reference, loaded.answer.text)
    run.result.determinism = replace(run.result.determinism, same_text=violation is None)
    if violation is not None:
        run.result.issues.append(CorrectnessIssue(violation.kind, -1, -1, violation.detail))


# ---------------------------------------------------------------------------------------- soak
async def _localize_when_stalled(run: _Run) -> None:
    await run.first_stall.wait()
    assert run.stalled_body is not None
    run.evidence = await localize(
        run.targets,
        run.stalled_body,
        model=run.result.model,
        idle_timeout_s=run.config.idle_timeout_s,
        progress=run.progress,
        http=run.http,
    )
    run.result.localized = True


def _localize_reserve(cfg: SoakConfig) -> float:
    """Time kept after the traffic for one localization (replays, two probe rounds, two scrapes)."""
    return min(cfg.idle_timeout_s + 4 * min(5.0, cfg.idle_timeout_s) + 1.0, cfg.duration_s / 2)


async def _traffic(run: _Run, reference: str | None) -> None:
    async with asyncio.TaskGroup() as group:
        run.sessions = [group.create_task(_session(run, o)) for o in run.result.sessions]
        if reference is not None:
            group.create_task(_under_load(run, reference))


async def _drive(run: _Run, hard_deadline: float) -> None:
    cfg = run.config
    run.result.sessions = [SessionOutcome(i) for i in range(cfg.sessions)]
    locator = asyncio.create_task(_localize_when_stalled(run)) if cfg.localize else None
    try:
        reference = await _reference(run) if cfg.check_determinism else None
        traffic_end = hard_deadline - (_localize_reserve(cfg) if cfg.localize else 0.0)
        try:
            async with asyncio.timeout(max(0.1, traffic_end - time.monotonic())):
                await _traffic(run, reference)
        except TimeoutError:
            run.result.deadline_hit = True
            run.progress("deadline reached: the sessions stop here (partial results kept)")
        if locator is not None and run.first_stall.is_set():
            await locator
    finally:
        if locator is not None:
            locator.cancel()
            await asyncio.gather(locator, return_exceptions=True)


def _conclude(run: _Run, start: float) -> None:
    result = run.result
    replays, probes, engines = run.evidence
    stalls, issues = tuple(result.stalls), tuple(result.issues)
    evidence = Evidence(
        run.targets.via_proxy, stalls, tuple(replays), tuple(probes), tuple(engines), issues
    )
    result.observations = observations(evidence)
    result.findings = diagnose(evidence)
    result.elapsed_s = time.monotonic() - start


async def _resolve_targets(run: _Run, timeout: float) -> Targets:
    targets = run.targets
    if targets.workers or not targets.router_url:
        return targets
    workers = await discover_workers(targets.router_url, timeout=timeout, http=run.http)
    return Targets(targets.entry_url, targets.router_url, workers, targets.router_service)


async def soak(
    config: SoakConfig,
    targets: Targets,
    *,
    progress: Progress | None = None,
    ledger: Ledger | None = None,
    document: Callable[[SoakResult], SoakDocument] | None = None,
    case_id: int | None = None,
    on_result: Callable[[SoakResult], None] | None = None,
) -> SoakResult:
    """Run the soak until every session is done, the deadline passes, or it is cancelled.

    Once it ends (also when Ctrl-C cancels it; then it re-raises), the result's ``document`` is
    recorded in ``ledger`` (``soak_id`` set; attached to ``case_id`` as evidence), then
    ``on_result`` is called with the final or partial result.
    """
    say = progress or (lambda _msg: None)
    start = time.monotonic()
    hard_deadline = start + config.duration_s
    result = SoakResult(config, targets)
    run = _Run(config, targets, result, say)
    try:
        async with asyncio.timeout(config.duration_s):
            probe_s = min(5.0, config.idle_timeout_s)
            model = config.model or await run.http.model_id(targets.entry_url, probe_s)
            result.model = model or "default"
            run.targets = result.targets = await _resolve_targets(run, probe_s)
            say(
                f"soak: {config.sessions} sessions x {config.rounds} rounds via "
                f"{targets.entry_url} ({config.connection} connections)"
            )
            await _drive(run, hard_deadline)
    except TimeoutError:
        result.deadline_hit = True
    except asyncio.CancelledError:
        result.interrupted = True
        raise
    finally:
        await run.http.aclose()
        _conclude(run, start)
        if ledger is not None and document is not None:
            result.soak_id = ledger.record_soak(document(result), case_id=case_id)
        if on_result is not None:
            on_result(result)
    return result
