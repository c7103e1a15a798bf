"""The multi-round agentic soak: sessions, failure detection, and automatic localization.

:func:`soak` prepares the run (the model, the router's workers, and the warm-up,
:func:`~servelab.ops.soak.localize.warm_up`: a cold start is paid and recorded, never read as a
hang), drives its traffic (:func:`servelab.ops.soak.traffic.drive`: the sessions, their stalls
and failures, one localization per distinct signature) under the run telemetry's watch and the
trace receiver, and concludes what the run saw
(:class:`~servelab.ops.soak.run.SoakRun`) once, at the end, into the one frozen
:class:`~servelab.core.soak.result.SoakResult` that the ledger stores and report words: the pure
rules of :mod:`servelab.core.soak.diagnose` turn the evidence into findings, or say why there is
none. Ctrl-C (cancellation) and the deadline end the soak with the partial result, recorded like
a full one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from servelab.core.load.metrics import SloAttainment, slo_attainment
from servelab.core.soak.events import EnginesStarted, SoakStarted
from servelab.core.soak.result import SoakConfig, SoakResult, SoakSessions, SoakTraces, Targets
from servelab.core.telemetry.rules import ClientWindow, ServerView
from servelab.core.telemetry.spans import Span
from servelab.core.telemetry.summary import MetricsSource, RunTelemetry, instance_of
from servelab.core.telemetry.traces import RequestPhases
from servelab.io.http.models import listed_model
from servelab.io.ledger.ledger import Ledger
from servelab.ops.context import Progress, silent
from servelab.ops.soak.answers import SoakProbes
from servelab.ops.soak.localize import discover_workers, warm_up
from servelab.ops.soak.run import SoakRun
from servelab.ops.soak.sessions import uncached
from servelab.ops.soak.traces import gather_soak_spans, request_phases
from servelab.ops.soak.traffic import drive
from servelab.ops.soak.verdict import Seen, conclude
from servelab.ops.telemetry.tracing import TraceCollector
from servelab.ops.telemetry.watch import MetricsWatch

__all__ = ["metric_sources", "soak"]


async def _resolve_targets(run: SoakRun, timeout: float) -> Targets:
    targets = run.targets
    if targets.workers or not targets.router_url:
        return targets
    workers = await discover_workers(targets.router_url, timeout=timeout, http=run.http)
    return replace(targets, workers=workers)


async def _prepare(run: SoakRun) -> None:
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
    run: SoakRun,
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


def _judged(run: SoakRun) -> SloAttainment | None:
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


async def _run_until_deadline(run: SoakRun, hard_deadline: float) -> None:
    config = run.config
    try:
        async with asyncio.timeout(config.duration_s):
            await _prepare(run)
            entry = run.targets.entry_url
            run.progress(SoakStarted(config.sessions, config.rounds, entry, config.connection))
            await drive(run, hard_deadline)
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
    run = SoakRun(config, targets, progress or silent)
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
