"""A soak's traffic, and what it books as it goes (into its
:class:`~servelab.ops.soak.run.SoakRun`).

Each session is one :class:`~servelab.core.soak.agentic.Conversation` driven through the entry point
on its own :class:`~servelab.io.http.stream.StreamClient` (one keep-alive connection,
``concurrency=1``; ``connection="fresh"`` closes it after every request; its connections traced). A
request that gets no byte for ``idle_timeout_s`` (the client's idle watchdog, head included) is a
stall (the one rule: :func:`servelab.core.soak.signatures.stall`); any other failure (HTTP status,
reset, KV-transfer error answer, malformed stream) an error; both get a failure signature
(:mod:`servelab.core.soak.signatures`) with the real session, round, payload size, connection age
and requests carried. A greedy probe at concurrency 1 before the sessions and again under their
load checks the answers stay the same (determinism); through a proxy, the largest payload answered
is checked for a stream the entry holds. Each distinct signature starts one localization
(:func:`~servelab.ops.soak.localize.localize`: the replay matrix and every other source), at most
:data:`~servelab.core.soak.signatures.MAX_LOCALIZATIONS`, once the traffic is over, one at a time
and within the deadline (:func:`drive`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

from servelab.core.soak.agentic import (
    Conversation,
    check_answer,
    compare_texts,
    greedy_probe_body,
)
from servelab.core.soak.body import ChatBody
from servelab.core.soak.events import RequestResent, SoakDeadlineReached, StallSeen, StreamHeld
from servelab.core.soak.evidence import CorrectnessIssue, MaskedResend, Stall
from servelab.core.soak.result import Determinism, FailedRequest, SoakClient
from servelab.core.soak.signatures import Failure, Outcome, Signature, classify, to_localize
from servelab.io.http.sdk import SdkClient
from servelab.io.http.stream import StreamClient
from servelab.ops.soak.client import Exchange, client, exchange, one_shot
from servelab.ops.soak.localize import localize
from servelab.ops.soak.replay import holds
from servelab.ops.soak.run import SoakRun
from servelab.ops.soak.sessions import SessionTally, decode_rate
from servelab.ops.soak.traces import FailedId

__all__ = ["drive"]


@dataclass(frozen=True)
class _Sent:
    """One of the soak's requests as it went: its body and round, the requests in flight with
    it (itself included), its connection's age, the requests it carried before and how long it
    sat idle, and when it was sent and ended (monotonic)."""

    body: ChatBody
    round: int
    in_flight: int = 1
    conn: tuple[float, int, float] = (0.0, 0, 0.0)
    window: tuple[float, float] = (0.0, 0.0)


def _session_client(run: SoakRun) -> StreamClient | SdkClient:
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


async def _session(run: SoakRun, tally: SessionTally) -> None:
    cfg = run.config
    conv = Conversation(
        tally.session, seed=cfg.seed, turn_words=cfg.turn_words, fresh=cfg.fresh_context
    )
    session_client = _session_client(run)
    async with session_client:
        for rnd in range(cfg.rounds):
            body = conv.request_body(model=run.model, max_tokens=cfg.max_tokens)
            raw = body.encoded()
            ticket, sent_at = run.load.start(), time.monotonic()
            try:
                ex = await exchange(session_client, raw, rnd)
            finally:
                in_flight = run.load.end(ticket)
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


def _account(run: SoakRun, tally: SessionTally, sent: _Sent, ex: Exchange) -> bool:
    """Book one exchange into the run; False when the session cannot go on."""
    record, rnd, body = ex.record, ex.record.index, sent.body
    run.tally(ex)
    _masked(run, tally.session, sent, ex)
    for v in check_answer(ex.answer):
        run.correctness.append(CorrectnessIssue(v.kind, tally.session, rnd, v.detail))
        size, (age, carried, _) = body.size, sent.conn
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
    size = body.size
    if run.sample is None or run.sample[2].size < size:
        run.sample = (tally.session, rnd, body)
    return True


def _masked(run: SoakRun, session: int, sent: _Sent, ex: Exchange) -> None:
    """Keep every resend the client made; from the second on they are a failure (localized
    once, like any other signature)."""
    for r in ex.resends:
        run.resends.append(
            MaskedResend(session, sent.round, r.idle_s, r.before_send, status=r.status)
        )
        run.progress(RequestResent(session, sent.round))
    if ex.resends and len(run.resends) >= 2:
        age, carried, _ = sent.conn
        last, size = ex.resends[-1], sent.body.size
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
        sig, session, sent.round, sent.body.size, round(age, 3), carried, rec.status,
        rec.error or "", detail, ex.received_bytes, ex.phase, round(idle, 1), sent.in_flight,
        ex.server, ex.echoed_id,
    )  # fmt: skip


def _note_stall(run: SoakRun, session: int, sent: _Sent, ex: Exchange) -> None:
    """Record a stall (session -1: the C1 probe) and localize its signature once."""
    size, received = sent.body.size, (ex.received_bytes, ex.received_events, ex.phase)
    rnd = sent.round
    run.failed_ids.append(FailedId(ex.record.request_id, session, rnd, Outcome.STALLED))
    age, carried, _ = sent.conn
    run.stalls.append(
        Stall(session, rnd, size, round(age, 3), carried, *received, ex.record.error or "")
    )
    run.failing.append(sent.window)
    run.progress(StallSeen(session, rnd, carried, size, ex.phase))
    _fail(run, _failure(session, sent, ex), sent.body)


def _fail(run: SoakRun, failure: Failure, body: ChatBody) -> None:
    """Keep the failure; start a localization when its signature is new and the budget lasts."""
    run.failures.append(failure)
    if not run.config.localize or not to_localize([failure], run.signatures):
        return
    run.signatures.append(failure.signature)
    run.locators.append(asyncio.create_task(_localize(run, failure, body)))


async def _localize(run: SoakRun, failure: Failure, body: ChatBody) -> None:
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


async def _hold_check(run: SoakRun) -> None:
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
        held = Failure(Signature.HELD, session, rnd, body.size, 0.0, 0)
        _fail(run, held, body)


# ---------------------------------------------------------------------------------- determinism
def _probe_body(run: SoakRun) -> ChatBody:
    return greedy_probe_body(
        model=run.model, max_tokens=run.config.max_tokens, seed=run.config.seed
    )


async def _reference(run: SoakRun) -> str | None:
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


async def _under_load(run: SoakRun, reference: str) -> None:
    """The same greedy probe again once the sessions have requests in flight."""
    cfg = run.config
    want = min(cfg.sessions, max(2, cfg.sessions // 2))
    give_up = time.monotonic() + cfg.duration_s / 2
    while run.load.now < want and run.active and time.monotonic() < give_up:
        await asyncio.sleep(0.02)
    if not run.active:
        run.determinism = replace(run.determinism, sessions_ended_first=True)
        return
    concurrency = run.load.now + 1
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
        _fail(run, Failure(Signature.CORRECTNESS, -1, -1, body.size, 0.0, 0), body)


# ------------------------------------------------------------------------------------- traffic
async def _traffic(run: SoakRun, reference: str | None) -> None:
    async with asyncio.TaskGroup() as group:
        run.tasks = [group.create_task(_session(run, s)) for s in run.sessions]
        if reference is not None:
            group.create_task(_under_load(run, reference))
        if run.probes is not None:
            group.create_task(run.probes.under_load(lambda: run.load.now, lambda: run.active))


async def drive(run: SoakRun, hard_deadline: float) -> None:
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
                  ChatBody.decoded(body))  # fmt: skip
        run.traffic_done.set()
        await asyncio.gather(*run.locators, return_exceptions=True)
    finally:
        run.traffic_done.set()
        for task in run.locators:
            task.cancel()
        await asyncio.gather(*run.locators, return_exceptions=True)
