"""``servelab soak``: multi-round agentic sessions, stall detection and hang localization."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import click

from servelab.cli.answeropts import answer_probes_option
from servelab.cli.boundary import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    err_console,
    json_option,
    print_json,
    run,
)
from servelab.cli.common import (
    SpecAndLedger,
    ledger_option,
    progress,
    resolve_target,
    show_progress,
    spec_option,
)
from servelab.cli.numbers import Finite, Whole
from servelab.cli.options import (
    CASE,
    HEADER,
    IDLE_TIMEOUT,
    SEED,
    SESSIONS,
    URL_TYPE,
    TargetOptions,
    no_ledger_option,
    slo_option,
    target_options,
    wait_option,
)
from servelab.cli.proxy import ProxyOptions, proxy_options
from servelab.cli.sharedoption import Default
from servelab.core.case.record import CaseRecord
from servelab.core.deploy.routers import RouterOptions
from servelab.core.load.lengths import MAX_TOKENS
from servelab.core.load.slo import SLO
from servelab.core.options import MAX_RUN_SECONDS, MAX_SECONDS
from servelab.core.soak.fresh import FreshContext, parse_fresh_context
from servelab.core.soak.result import SoakClient, SoakConfig, SoakResult, Targets, WorkerTarget
from servelab.core.urls import authorized_twice
from servelab.errors import CaseError, OptionError
from servelab.io.ledger.ledger import Ledger
from servelab.io.lock import Hold
from servelab.io.specfile import LoadedSpec
from servelab.ops.knob import live_knobs
from servelab.ops.soak import soak as ops
from servelab.ops.telemetry.tracing import TraceCollector, trace_collector
from servelab.ops.verify.answers import answers_owner
from servelab.report.soak import soak as report
from servelab.report.text import AUTHORIZED_TWICE

__all__ = [
    "SOAK_IDLE_TIMEOUT",
    "soak_command",
    "targets_from",
]

#: The soak's own idle timeout: it is the stall threshold.
SOAK_IDLE_TIMEOUT = Default(
    "30", "the stall threshold, so a stall is caught, and localized, well inside --duration"
)


def targets_from(
    where: SpecAndLedger, url: str | None, router_url: str | None
) -> tuple[Targets, Path, LoadedSpec | None]:
    """Where to soak and which state dir holds the ledger.

    With ``--url`` and no ``-f``: that entry point, ``--router-url`` to compare against, workers
    discovered from the router's /workers. Otherwise the spec's entry point (proxy, else router),
    its router and its prefill/decode services (``--url``/``--router-url`` still override).
    """
    target, loaded, state_dir = resolve_target(where, url)
    if loaded is None:
        router = router_url.rstrip("/") if router_url else None
        return Targets(target.url.rstrip("/"), router), state_dir, None
    loaded = where.deployment()
    spec = loaded.spec
    router_name = spec.router_name
    router = router_url or (spec.service(router_name).url if router_name else None)
    workers = tuple(
        WorkerTarget(name, svc.role, svc.url, svc.bootstrap_port)
        for name, svc in spec.services.items()
        if svc.role in ("prefill", "decode")
    )
    router = router.rstrip("/") if router else None
    name = router_name or "router"
    metrics = None
    if router_name and spec.service(router_name).start == "router":
        svc = spec.service(router_name)
        metrics = f"http://{svc.hostname}:{(svc.router or RouterOptions()).prometheus_port}"
    entry = target.url.rstrip("/")
    return Targets(entry, router, workers, name, metrics, spec.engine), state_dir, loaded


def _on_result(ledger_path: Path | None) -> Callable[[SoakResult], None]:
    def show(result: SoakResult) -> None:
        if result.interrupted:
            text = report.render_soak(result)
            err_console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
        if result.soak_id is not None:
            progress(f"recorded soak #{result.soak_id} in {ledger_path}")

    return show


def _check_case(ledger_path: Path, case_id: int | None) -> None:
    if case_id is None:
        return
    with Ledger.open(ledger_path) as ledger:
        if ledger.get(CaseRecord, case_id) is None:
            raise CaseError(f"no case {case_id} in {ledger_path}")


#: The default fresh context: long rounds exercise long uncached prefills whatever the cache does.
FRESH_DEFAULT = "short:48,long:1200"


def _fresh_sizes(_ctx: object, _param: object, value: str) -> tuple[int, int] | None:
    if value.strip().lower() == "off":
        return None
    try:
        short, long = parse_fresh_context(value)
        FreshContext(short, long)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    return short, long


@click.command("soak")
@spec_option
@SESSIONS.option()
@click.option("--rounds", default=6, show_default=True, type=Whole(1, 10_000))
@click.option(
    "--think-time",
    default=0.0,
    show_default=True,
    type=Finite(0, MAX_SECONDS),
    help="Seconds an agent waits between rounds.",
)
@click.option(
    "--connection",
    type=click.Choice(["reuse", "fresh"]),
    default="reuse",
    show_default=True,
    help="One keep-alive connection per session, or a new one per request.",
)
@click.option(
    "--client",
    "client_kind",
    type=click.Choice([c.value for c in SoakClient]),
    default=SoakClient.SERVELAB.value,
    show_default=True,
    help="Who sends the sessions: servelab's client (it sends a request again when the server "
    "closed its kept-alive connection, and records it), naive (a plain keep-alive client that "
    "never does), or openai (the official OpenAI SDK, its pool and retries: the 'openai' extra).",
)
@HEADER.option()
@click.option(
    "--duration",
    default=300.0,
    show_default=True,
    type=Finite(1, MAX_RUN_SECONDS),
    help="Total deadline of the soak, seconds (localization included).",
)
@IDLE_TIMEOUT.option(SOAK_IDLE_TIMEOUT)
@click.option("--max-tokens", default=24, show_default=True, type=Whole(1, MAX_TOKENS))
@click.option(
    "--fresh-context",
    "fresh_sizes",
    default=FRESH_DEFAULT,
    show_default=True,
    callback=_fresh_sizes,
    help="The new context each round adds (its user turn or each tool result), in words: "
    "short:WORDS,long:WORDS; 'off': the same short turn every round.",
)
@click.option(
    "--long-share",
    default=0.25,
    show_default=True,
    type=Finite(0, 1),
    help="The share of rounds that add the long context (drawn from --seed, session, round).",
)
@slo_option()
@SEED.option()
@target_options()
@proxy_options
@click.option("--router-url", default=None, type=URL_TYPE, help="The router to compare against.")
@click.option(
    "--router-metrics-url",
    default=None,
    type=URL_TYPE,
    help="The router's Prometheus endpoint (http://HOST:PORT; default: from the spec).",
)
@click.option("--no-localize", is_flag=True, help="Detect stalls but do not localize them.")
@answer_probes_option()
@ledger_option
@no_ledger_option
@CASE.option()
@json_option
@wait_option
def soak_command(
    spec_path: Path | None,
    sessions: int,
    rounds: int,
    think_time: float,
    connection: str,
    client_kind: str,
    headers: tuple[tuple[str, str], ...],
    duration: float,
    idle_timeout_s: float,
    max_tokens: int,
    fresh_sizes: tuple[int, int] | None,
    long_share: float,
    slo: SLO | None,
    seed: int,
    target: TargetOptions,
    proxy: ProxyOptions,
    router_url: str | None,
    router_metrics_url: str | None,
    no_localize: bool,
    answer_probes: int,
    ledger_path: Path | None,
    no_ledger: bool,
    case_id: int | None,
    as_json: bool,
    wait: bool,
) -> None:
    """Multi-round agentic sessions; detect stalls within bounded time and localize them."""
    where = SpecAndLedger(spec_path, ledger_path)
    targets, state_dir, loaded = targets_from(where, target.url, router_url)
    if target.url is not None and authorized_twice(target.url, headers):
        raise OptionError(AUTHORIZED_TWICE)
    if router_metrics_url:
        targets = replace(targets, metrics_url=router_metrics_url.rstrip("/"))
    targets = _routed(targets, proxy)
    config = SoakConfig(
        sessions=sessions,
        rounds=rounds,
        think_time_s=think_time,
        connection=connection,
        client=SoakClient(client_kind),
        headers=headers,
        duration_s=duration,
        idle_timeout_s=idle_timeout_s,
        max_tokens=max_tokens,
        fresh_context=None if fresh_sizes is None else FreshContext(*fresh_sizes, long_share),
        seed=seed,
        model=target.model,
        localize=not no_localize,
        knobs=run(live_knobs(loaded)) if loaded is not None else {},
        slo=slo,
        answer_probes=answer_probes,
        answers_from=answers_owner(loaded) if loaded is not None else None,
    )
    ledger_file = where.ledger_path(state_dir)
    _check_case(ledger_file, case_id)
    traces = None if loaded is None else trace_collector(loaded.spec)
    with nullcontext() if loaded is None else where.exclusive(wait=wait, kind=Hold.MEASURE):
        result = _soak(config, targets, None if no_ledger else ledger_file, case_id, traces)
    _show(result, as_json)


def _routed(targets: Targets, proxy: ProxyOptions) -> Targets:
    """``targets`` with the path to the entry (a forward proxy: the router, when not known
    otherwise, is the entry reached straight, the replay's direct hop)."""
    path = proxy.route(targets.entry_url)
    router = targets.router_url
    if path.forwarded and router is None:
        router = targets.entry_url
    return replace(targets, route=path, router_url=router)


def _soak(
    config: SoakConfig,
    targets: Targets,
    ledger_file: Path | None,
    case_id: int | None,
    traces: TraceCollector | None = None,
) -> SoakResult:
    """Run the soak; ops records it in the ledger (``ledger_file`` None: not recorded). With
    ``traces`` (a spec's ``[tracing]``), the spans received are recorded with it."""
    with nullcontext(None) if ledger_file is None else Ledger.open(ledger_file) as ledger:
        if ledger is not None:
            ledger.check_writable()  # before the load: a ledger that fails loses no soak
        return run(
            ops.soak(
                config,
                targets,
                progress=show_progress,
                ledger=ledger,
                case_id=case_id,
                on_result=_on_result(ledger_file),
                traces=traces,
            )
        )


def _show(result: SoakResult, as_json: bool) -> None:
    if as_json:
        print_json(report.soak_json(result))
    else:
        console.print(
            report.render_soak(result), markup=False, highlight=False, end="", soft_wrap=True
        )
    raise SystemExit(EXIT_OK if result.ok else EXIT_FAILED)
