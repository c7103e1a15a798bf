"""The e2e layer of verification: requests through the deployment, as a client sends them.

- **the probe** (:func:`e2e_check`): one streaming chat completion through the entry point (proxy,
  else router) with a prompt long enough to need a real KV transfer: status, TTFT, total time,
  tokens, cold or warm (from the decodes' own counters of finished requests in their
  ``/metrics``; + a second probe when those cannot be read, or say cold), then ONE long prompt
  sized from the engines' own input limit, capped (:mod:`servelab.ops.verify.longprompt`: a KV
  transfer that fails only for long prompts fails ``e2e.long_failed``; no limit read: skipped,
  and said in the check's data). Beside a soak's test of a hang (``investigate``'s localizing
  verification, ``case test``'s arms), the long prompt waits at most that soak's replay-matrix
  bound (:func:`bounded_by`), not the default 120 s; so does the probe before it where no restart
  came first (``investigate``'s localizing verification: the reproducing soak warmed the engines).
- **every worker reached** (:func:`reach_checks`, xPyD only: a role with two or more workers):
  each prefill's and decode's real counter of its requests is read (its own ``/metrics``, else
  the router's per-worker counter: :mod:`servelab.core.verify.served`), small requests are sent
  through the router until every counted worker's count grew (bounded: ``reach_requests``), and
  each worker gets its own outcome: reached, not reached, or uncounted (no real counter could be
  read: unknown, with the reason, and the check fails).

This module returns typed checks (:class:`~servelab.core.verify.checks.Check`: an
:class:`~servelab.core.verify.e2e.E2EProbe`, a :class:`~servelab.core.verify.e2e.WorkerReach`
per worker); :mod:`servelab.report.verify` words them.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from time import perf_counter_ns

from servelab.core.load.identity import request_identity
from servelab.core.load.proxyroute import ProxyRoute, route
from servelab.core.load.records import RequestRecord
from servelab.core.soak.deadlines import Deadlines
from servelab.core.telemetry.promtext import Exposition
from servelab.core.telemetry.summary import MetricsSource
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.core.verify.coldstart import (
    COLD_MIN_S,
    COLD_RATIO,
    StartClass,
    classify_start,
    decode_counts,
    needs_second_probe,
)
from servelab.core.verify.e2e import E2EProbe, RequestTiming, WorkerReach
from servelab.core.verify.events import ProbingWorkers
from servelab.core.verify.longprompt import EngineLimit
from servelab.core.verify.served import Count, Gap, Scrapes, counted
from servelab.errors import ModelNotListed
from servelab.io.http.client import HttpClient, chat_body
from servelab.io.http.models import listed_model
from servelab.io.http.stream import StreamClient
from servelab.ops.context import Operation
from servelab.ops.telemetry.watch import metrics_sources, scrape_once
from servelab.ops.verify.layers.reader import failed
from servelab.ops.verify.longprompt import long_probe

__all__ = ["E2EOptions", "bounded_by", "e2e_check", "probe_body", "reach_checks"]


@dataclass(frozen=True)
class E2EOptions:
    """The e2e probe: prompt size (words ~ tokens), output tokens, timeouts, cold heuristics, and
    at most how many small requests prove every worker of an xPyD deployment reachable.

    Without the decodes' own request counters, a first probe is "cold" when it took more than
    ``cold_ratio`` times the immediate second probe and at least ``cold_min_s`` longer (the rule:
    :func:`servelab.core.verify.coldstart.classify_start`).
    """

    prompt_tokens: int = 512
    max_tokens: int = 16
    timeout_s: float = 120.0
    #: the long prompt's own timeout (None: ``timeout_s``); it is sent once the probe has paid
    #: any cold start (:func:`bounded_by`)
    long_timeout_s: float | None = None
    #: the probe's (and its second's) own timeout (None: ``timeout_s``); bounded only where no
    #: restart came before it, so no cold start is paid (:func:`bounded_by` ``warm=True``)
    probe_timeout_s: float | None = None
    cold_ratio: float = COLD_RATIO
    cold_min_s: float = COLD_MIN_S
    reach_requests: int = 16
    #: Greedy answer probes after the probe (0: none), and whether their answers become the
    #: deployment's references anew (:mod:`servelab.ops.verify.answers`).
    answer_probes: int = 3
    rebase_answers: bool = False
    #: the proxy options and environment the path to the entry point is decided from
    #: (:func:`servelab.core.load.proxyroute.route`): ``--proxy``, ``--no-proxy``, the
    #: ``*_PROXY`` variables the command was run with
    proxy: str | None = None
    no_proxy: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    def route(self, base: str) -> ProxyRoute:
        """The path to ``base`` (ValueError: the proxy's URL is not one)."""
        return route(base, self.env, proxy=self.proxy, bypass=self.no_proxy)


def bounded_by(deadlines: Deadlines, *, warm: bool = False) -> E2EOptions:
    """The e2e options of a verification beside a soak that tests a hang: the long prompt waits
    at most as long as that soak's replay matrix without a deadline (``deadlines.matrix_s``, 8 x
    its idle timeout), never longer than ``timeout_s``. The soak says what a hang is; a long
    prompt the hang swallows (a guilty knob's long-context fault) fails at that bound instead of
    after 120 s. The probe before it keeps ``timeout_s``: it pays a co-restart's cold start
    (``case test``'s arms). ``warm``: no restart came before this verification (``investigate``'s
    localizing one, right after the reproducing soak), so the probe is bounded the same way (a
    wedged decode fails it at the bound)."""
    default = E2EOptions()
    bound = min(default.timeout_s, deadlines.matrix_s)
    return replace(default, long_timeout_s=bound, probe_timeout_s=bound if warm else None)


def _prompt(words: int, salt: str) -> str:
    vocab = ("prefill", "decode", "router", "cache", "page", "token", "transfer", "bootstrap")
    body = " ".join(vocab[i % len(vocab)] for i in range(max(words - 12, 1)))
    return f"servelab verify probe {salt}: repeat the last word of this text. {body}"


async def _stream_once(
    base: str, model: str, prompt: str, opts: E2EOptions, proxy: str | None = None
) -> RequestRecord:
    record = RequestRecord(index=0, scheduled_ns=perf_counter_ns())
    record.request_id, record.traceparent = request_identity(secrets.token_hex(8), 0)
    body = chat_body(model, prompt, opts.max_tokens)
    deadline = perf_counter_ns() + int(opts.timeout_s * 1e9)
    async with StreamClient(
        base, concurrency=1, idle_timeout_s=opts.timeout_s, proxy=proxy
    ) as client:
        return await client.stream("/v1/chat/completions", body, record, deadline_ns=deadline)


def _timing(record: RequestRecord) -> RequestTiming:
    """The request's status, timings, tokens and error (``error_detail``: the first 200
    characters of what came with the error)."""
    end = record.end_ns or record.sent_ns
    first = next((t for t, n in zip(record.event_ns, record.event_tokens, strict=True) if n), None)
    detail = None if record.error is None else " ".join(record.error_detail.split())[:200]
    return RequestTiming(
        status=record.status,
        ttft_s=None if first is None else round((first - record.sent_ns) / 1e9, 4),
        total_s=round((end - record.sent_ns) / 1e9, 4),
        completion_tokens=record.output_tokens,
        prompt_tokens=record.input_tokens,
        error=record.error,
        error_detail=detail,
    )


def _record_failed(record: RequestRecord) -> bool:
    """Failed: an error, or no content token in the stream."""
    return record.error is not None or record.output_tokens <= 0


async def _scrape(http: HttpClient, source: MetricsSource | None) -> Exposition | None:
    """One scrape of ``source`` (None: no source, or it did not answer)."""
    if source is None:
        return None
    return (await scrape_once(http, source, 0.0, 15.0)).exposition


async def _requests_served(http: HttpClient, decode_urls: list[str]) -> tuple[int, ...] | None:
    """Each decode's own count of finished requests so far (None: a ``/metrics`` that did not
    answer, or without the engine's series)."""
    texts = []
    for url in decode_urls:
        got = await http.probe(url + "/metrics", timeout=15.0, body_limit=None)
        texts.append(got.body if got.status == 200 else None)
    return decode_counts(texts)


def _classify(
    before: tuple[int, ...] | None, first_s: float, second_s: float | None, opts: E2EOptions
) -> StartClass:
    """Cold, warm or unknown (:func:`~servelab.core.verify.coldstart.classify_start`) from the
    probes' total times."""
    return classify_start(before, first_s, second_s, ratio=opts.cold_ratio, min_s=opts.cold_min_s)


async def e2e_check(
    entry: str, base: str, decode_urls: list[str], opts: E2EOptions,
    limits: tuple[EngineLimit, ...] = (),
) -> Check:  # fmt: skip
    """The e2e check of ``entry``: one streaming chat completion through ``base`` (+ a second when
    cold, or when the decodes' counters cannot be read), then one long prompt sized from the
    engines' ``limits`` (:mod:`servelab.ops.verify.longprompt`; none read: skipped, and said); a
    failed request's data holds its status and its error."""
    path = opts.route(base)
    proxy = path.proxy if path.forwarded else None
    short = opts if opts.probe_timeout_s is None else replace(opts, timeout_s=opts.probe_timeout_s)
    async with HttpClient(proxy=proxy) as through, HttpClient() as http:
        try:
            model = await listed_model(through, base, 5.0)
        except ModelNotListed as exc:
            return failed(Layer.E2E, entry, exc)[0]
        before = await _requests_served(http, decode_urls)
    first_rec = await _stream_once(base, model, _prompt(opts.prompt_tokens, "a"), short, proxy)
    probe = E2EProbe.of(model, _timing(first_rec), before)
    probe = replace(probe, path=None if path == ProxyRoute() else path)
    if _record_failed(first_rec):
        return Check(entry, False, CheckCode.E2E_FAILED, probe)
    if needs_second_probe(before):
        prompt = _prompt(opts.prompt_tokens, "b")
        second_rec = await _stream_once(base, model, prompt, short, proxy)
        probe = replace(probe, second=_timing(second_rec))
        if _record_failed(second_rec):
            return Check(entry, False, CheckCode.E2E_SECOND_FAILED, probe)
    second_s = None if probe.second is None else probe.second.total_s
    start = _classify(before, probe.total_s, second_s, opts)
    probe = replace(probe, start=start.start, start_reason=start.reason)

    long_opts = (
        opts if opts.long_timeout_s is None else replace(opts, timeout_s=opts.long_timeout_s)
    )

    async def send(prompt: str) -> RequestTiming:
        return _timing(await _stream_once(base, model, prompt, long_opts, proxy))

    probe = replace(probe, long=await long_probe(limits, first_rec.input_tokens, send))
    if probe.long is not None and probe.long.failed:
        return Check(entry, False, CheckCode.E2E_LONG_FAILED, probe)
    return Check(entry, True, CheckCode.E2E_PASSED, probe)


# -- every worker reached (xPyD) -----------------------------------------------------------------


def _xpyd(op: Operation) -> list[str]:
    """The prefill and decode workers, when a role has two or more of them (else none)."""
    prefills, decodes = op.spec.by_role("prefill"), op.spec.by_role("decode")
    if len(prefills) < 2 and len(decodes) < 2:
        return []
    return [name for name in op.spec.services if name in prefills or name in decodes]


@dataclass(frozen=True)
class _Sources:
    """Where each worker's counters are read: its own ``/metrics`` and the router's."""

    workers: dict[str, MetricsSource]
    router: MetricsSource | None

    async def scrape(self, http: HttpClient, names: list[str]) -> dict[str, Scrapes]:
        router = await _scrape(http, self.router)
        return {
            name: Scrapes(await _scrape(http, self.workers.get(name)), router) for name in names
        }


async def _sources(op: Operation, names: list[str]) -> _Sources:
    found = await metrics_sources(op)
    router = next((s for s in found if s.kind == "router"), None)
    return _Sources({s.service: s for s in found if s.service in names}, router)


def probe_body(model: str, words: str, n: int) -> dict[str, object]:
    """The ``n``-th small probe request: its text starts with ``n``, so no two share a prefix a
    cache-aware router would match (smg 1.13's PD ``cache_aware`` sends a text it has seen to the
    worker that served it: the same probe every time would never reach the others)."""
    return {"model": model, "messages": [{"role": "user", "content": f"{n} {words}"}],
            "max_tokens": 2, "stream": False}  # fmt: skip


async def _send_until_reached(
    http: HttpClient, router: str, model: str, urls: dict[str, str], sources: _Sources,
    opts: E2EOptions,
) -> tuple[dict[str, Scrapes], dict[str, Scrapes], list[int | None]]:  # fmt: skip
    """Small requests through the router, one at a time, until every counted worker's count
    grew or ``reach_requests`` were sent: (before, after, the statuses answered)."""
    names = list(urls)
    before = await sources.scrape(http, names)
    after = dict(before)
    statuses: list[int | None] = []

    def waiting() -> list[str]:
        """The counted workers whose count has not grown yet (more requests cannot count the
        others)."""
        counts = {name: counted(urls[name], before[name], after[name]) for name in names}
        return [name for name, c in counts.items() if isinstance(c, Count) and not c.grew]

    while waiting() and len(statuses) < opts.reach_requests:
        body = probe_body(model, "servelab reach probe", len(statuses))
        result = await http.probe(
            router + "/v1/chat/completions", timeout=opts.timeout_s, method="POST", json_body=body
        )
        statuses.append(result.status)
        after = await sources.scrape(http, names)
    return before, after, statuses


def _reach_check(
    name: str, role: str, via: str, reading: Count | Gap, sent: list[int | None]
) -> Check:
    """One worker's outcome from its count; uncounted (``gap`` says why) fails: unknown is not a
    pass."""
    if isinstance(reading, Gap):
        data = WorkerReach(role, via, None, None, len(sent), tuple(sent), gap=reading)
        return Check(name, False, CheckCode.E2E_WORKER_UNCOUNTED, data)
    data = WorkerReach(role, via, reading.before, reading.after, len(sent), tuple(sent),
                       reading.signal, reading.counter)  # fmt: skip
    code = CheckCode.E2E_WORKER_REACHED if reading.grew else CheckCode.E2E_WORKER_UNREACHED
    return Check(name, reading.grew, code, data)


async def reach_checks(op: Operation, opts: E2EOptions) -> list[Check]:
    """One check per prefill and decode worker of an xPyD deployment: did a request sent
    through the router reach it (a real counter of its requests grew)? None for 1P1D (the probe
    already went through the only pair)."""
    names = _xpyd(op)
    router = op.spec.router_name
    if not names or router is None:
        return []
    op.say(ProbingWorkers(router))
    base = await op.url(router)
    urls = {name: op.spec.service(name).url for name in names}
    sources = await _sources(op, names)
    async with HttpClient() as http:
        model = await listed_model(http, base, 5.0)  # ModelNotListed: the layer's error
        before, after, sent = await _send_until_reached(http, base, model, urls, sources, opts)
    checks = []
    for name in names:
        reading = counted(urls[name], before[name], after[name])
        checks.append(_reach_check(name, op.spec.service(name).role, router, reading, sent))
    return checks
