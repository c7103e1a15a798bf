"""One localization: the replay matrix plus every other source of evidence, and the warm-up.

:func:`localize` runs, for one failure, the replay matrix (:mod:`servelab.ops.soak.replay`) while it
scrapes each engine's ``/metrics`` before and after, then probes the router (its engine's readiness
path, ``/readiness``, and ``/workers``), every worker's (``/health``), the router's own
Prometheus metrics, ``/get_loads`` and each engine's ``/get_load``. A source that does not
answer is recorded as unknown (an empty scrape, ``known=False``, a load of None), never as
healthy.

:func:`warm_up` runs before the soak measures anything: it reads whether the decodes are cold
(their own counters of finished requests, as ``verify`` does) and, when they are (or when it cannot
tell), sends one minimal request per decode through the router with a generous bound, then a
second one, and classifies the start (:func:`servelab.core.verify.coldstart.classify_start`).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from servelab.core.engines import ENGINES, canonical_metrics
from servelab.core.knobs.serverinfo import EngineReport
from servelab.core.soak.agentic import e2e_probe_body
from servelab.core.soak.body import ChatBody
from servelab.core.soak.clock import DecodeRate
from servelab.core.soak.deadlines import Deadlines
from servelab.core.soak.events import Localizing
from servelab.core.soak.evidence import (
    DIAGNOSED_METRICS,
    EngineActivity,
    Localization,
    Probe,
    ProbeKind,
    parse_metrics,
    parse_worker_list,
)
from servelab.core.soak.result import Targets, WorkerTarget
from servelab.core.soak.signatures import Failure
from servelab.core.telemetry.router import RouterMetrics, WorkerLoad, parse_loads, router_metrics
from servelab.core.verify.coldstart import (
    StartClass,
    classify_start,
    decode_counts,
    needs_second_probe,
)
from servelab.core.verify.pair import FieldVerdict, PairReport, pair_fields, pair_values
from servelab.io.http.client import HttpClient, using_client
from servelab.ops.context import Progress, silent
from servelab.ops.soak.client import Headers, one_shot
from servelab.ops.soak.replay import replay_matrix

__all__ = ["discover_workers", "localize", "warm_up"]


async def discover_workers(
    router_url: str, *, timeout: float = 5.0, http: HttpClient | None = None
) -> tuple[WorkerTarget, ...]:
    """Engines behind a router, from its ``GET /workers`` (on ``http`` when given)."""
    async with using_client(http) as client:
        body = await _get_text(client, router_url.rstrip("/") + "/workers", timeout)
    found = parse_worker_list(body or "")
    return tuple(
        WorkerTarget(f"{role}{i}", role, url, port) for i, (role, url, port) in enumerate(found)
    )


async def _get_text(http: HttpClient, url: str, timeout: float) -> str | None:
    """The whole body of ``GET url`` (None on any failure: unknown, not evidence of health)."""
    result = await http.probe(url, timeout=timeout, body_limit=None)
    return result.body if result.status == 200 else None


async def _scrape(
    http: HttpClient, workers: tuple[WorkerTarget, ...], timeout: float
) -> list[dict[str, float]]:
    """Each engine's /metrics, parsed, the metrics the diagnosis reads (an empty dict when it
    could not be read)."""
    texts = await asyncio.gather(*(_get_text(http, w.url + "/metrics", timeout) for w in workers))
    parsed = [canonical_metrics(parse_metrics(t or "")) for t in texts]  # vLLM names -> SGLang's
    return [{k: v for k, v in p.items() if k in DIAGNOSED_METRICS} for p in parsed]


async def _workers_probe(http: HttpClient, targets: Targets, timeout: float) -> Probe:
    """The router's own list of workers: ok when it lists at least one prefill and one decode."""
    assert targets.router_url is not None
    start = time.monotonic()
    found = await discover_workers(targets.router_url, timeout=timeout, http=http)
    roles = sorted(w.role for w in found)
    ok = "prefill" in roles and "decode" in roles
    detail = f"{len(found)} listed ({', '.join(roles) or 'none'})"
    elapsed = time.monotonic() - start
    return Probe(targets.router_service, "router", ProbeKind.WORKERS, ok, None, elapsed, detail)


async def _probes(http: HttpClient, targets: Targets, timeout: float) -> list[Probe]:
    jobs: list[tuple[str, str, ProbeKind, Any]] = []
    facts = ENGINES[targets.engine]  # which paths say "ready": the engine's, never typed here
    if targets.router_url:
        readiness = http.probe(targets.router_url + facts.router_ready_path, timeout=timeout)
        jobs.append((targets.router_service, "router", ProbeKind.READINESS, readiness))
    for w in targets.workers:
        health = http.probe(w.url + facts.worker_ready_path, timeout=timeout)
        jobs.append((w.service, w.role, ProbeKind.HEALTH, health))
    results = await asyncio.gather(*(j[3] for j in jobs))
    probes = [
        Probe(s, role, kind, r.ok, r.status, r.elapsed_s, r.describe()[:200])
        for (s, role, kind, _), r in zip(jobs, results, strict=True)
    ]
    if targets.router_url:
        probes.insert(1, await _workers_probe(http, targets, timeout))
    return probes


async def _router_metrics(http: HttpClient, targets: Targets, timeout: float) -> RouterMetrics:
    if not targets.metrics_url:
        return RouterMetrics(known=False)
    return router_metrics(await _get_text(http, targets.metrics_url + "/metrics", timeout))


def _engine_load(doc: object) -> float | None:
    """An engine's ``/get_load`` (``[{"num_reqs": ...}]`` per dp rank) summed; None: unknown."""
    items = doc if isinstance(doc, list) else [doc] if isinstance(doc, dict) else None
    if not items:
        return None
    found = [i.get("num_reqs") for i in items if isinstance(i, dict)]
    numbers = [float(n) for n in found if isinstance(n, int | float)]
    return sum(numbers) if numbers else None


async def _loads(http: HttpClient, targets: Targets, timeout: float) -> list[WorkerLoad]:
    docs = await asyncio.gather(*(http.get_json(w.url + "/get_load") for w in targets.workers))
    loads = [
        WorkerLoad(w.service, "engine", _engine_load(d))
        for w, d in zip(targets.workers, docs, strict=True)
    ]
    if targets.router_url:
        text = await _get_text(http, targets.router_url + "/get_loads", timeout)
        by_url = parse_loads(text) or {}
        loads += [WorkerLoad(w.service, "router", by_url.get(w.url)) for w in targets.workers]
    return loads


async def _evidence(
    http: HttpClient,
    targets: Targets,
    failure: Failure,
    body: ChatBody,
    model: str,
    bounds: tuple[float, float | None],
    headers: Headers,
    rate: DecodeRate | None = None,
) -> Localization:
    idle, deadline = bounds
    probe_s = Deadlines(idle).probe_s
    t0 = time.monotonic()
    before = await _scrape(http, targets.workers, probe_s)
    until = None if deadline is None else deadline - 2 * probe_s
    matrix = await replay_matrix(
        targets,
        failure,
        body,
        model=model,
        idle_s=idle,
        deadline=until,
        headers=headers,
        rate=rate,
    )
    probes, metrics, loads, pairs = await asyncio.gather(
        _probes(http, targets, probe_s),
        _router_metrics(http, targets, probe_s),
        _loads(http, targets, probe_s),
        _pairs(http, targets, probe_s),
    )
    after = await _scrape(http, targets.workers, probe_s)
    interval = time.monotonic() - t0
    engines = tuple(
        EngineActivity(w.service, w.role, b, a, interval)
        for w, b, a in zip(targets.workers, before, after, strict=True)
    )
    elapsed = time.monotonic() - t0
    return Localization(
        failure, matrix, tuple(probes), engines, metrics, tuple(loads), elapsed, pairs
    )


async def _report(http: HttpClient, url: str, engine: str, timeout: float) -> EngineReport | None:
    """A worker's ``/server_info`` (its older alias on SGLang); None when it gives none."""
    for path in ENGINES[engine].report_paths if engine in ENGINES else ():
        doc = await http.get_json(url.rstrip("/") + path, timeout=timeout)
        if isinstance(doc, dict):
            return EngineReport(doc)
    return None


async def _pairs(http: HttpClient, targets: Targets, timeout: float) -> tuple[PairReport, ...]:
    """The prefill/decode pairs whose workers disagree on what the KV hand-off carries (verify's
    pair layer, from what the workers report now)."""
    workers, engine = targets.workers, targets.engine
    found = await asyncio.gather(*(_report(http, w.url, engine, timeout) for w in workers))
    values = {w.service: pair_values(engine, doc) for w, doc in zip(workers, found, strict=True)}
    reports = [
        PairReport(p.service, d.service, pair_fields(engine, values[p.service], values[d.service]))
        for p in workers if p.role == "prefill" for d in workers if d.role == "decode"
    ]  # fmt: skip
    return tuple(r for r in reports if r.verdict is FieldVerdict.MISMATCH)


async def localize(
    targets: Targets,
    failure: Failure,
    body: ChatBody,
    *,
    model: str,
    idle_timeout_s: float,
    progress: Progress | None = None,
    http: HttpClient | None = None,
    deadline: float | None = None,
    headers: Headers = (),
    rate: DecodeRate | None = None,
) -> Localization:
    """The replay matrix for ``failure`` (its payload ``body``, the soak's request ``headers``)
    and every other source, each request bounded by the idle timeout; the matrix's later turns
    stop in time for the probes to finish before ``deadline`` (monotonic). Probes and scrapes go
    on ``http`` when given; ``rate``: the soak's own streams' decode rate, which a non-streamed
    replay's deadline is derived from (:mod:`servelab.core.soak.clock`)."""
    (progress or silent)(Localizing(failure.signature))
    async with using_client(http) as client:
        bounds = (idle_timeout_s, deadline)
        return await _evidence(client, targets, failure, body, model, bounds, headers, rate)


async def _served(http: HttpClient, targets: Targets) -> list[int] | None:
    decodes = [w for w in targets.workers if w.role == "decode"]
    texts = await asyncio.gather(*(_get_text(http, w.url + "/metrics", 5.0) for w in decodes))
    counts = decode_counts(texts)
    return None if counts is None else list(counts)


async def _timed(url: str, body: ChatBody, idle: float) -> float | None:
    start = time.monotonic()
    ex = await one_shot(url, body, idle)
    return time.monotonic() - start if ex.record.ok else None


async def warm_up(
    http: HttpClient, targets: Targets, model: str, *, bound_s: float, idle_s: float
) -> StartClass:
    """Cold, warm or unknown; a cold (or unknown) start is paid here, before any measurement."""
    before = await _served(http, targets)
    if not needs_second_probe(before):
        return classify_start(before, 0.0, None)
    url = targets.router_url or targets.entry_url
    body = e2e_probe_body(model=model)
    decodes = max(1, sum(w.role == "decode" for w in targets.workers))
    firsts = await asyncio.gather(*(_timed(url, body, bound_s) for _ in range(decodes)))
    done = [t for t in firsts if t is not None]
    first_s = max(done) if done else bound_s
    second_s = await _timed(url, body, idle_s)
    return classify_start(before, first_s, second_s)
