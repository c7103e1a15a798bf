"""``servelab bench``: closed- or open-loop load against a deployment's entry point, a recorded
trace replayed (``--trace``), or the largest load meeting an SLO (``--find-capacity``).

Before any load, ``GET /v1/models`` must answer an OpenAI model list; otherwise one line says what
answered (status, content type, an HTML page's title) or that nothing did, and nothing is run.
``--url`` takes a server's base URL or the OpenAI SDK's ``.../v1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from contextlib import nullcontext
from pathlib import Path

import click

from servelab.cli.boundary import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    err_console,
    interruption,
    print_json,
    run,
    stop_on_signals,
)
from servelab.cli.capacity import (
    CAPACITY_BYTES,
    CAPACITY_NAMES,
    check_probe_s,
    probe_s_option,
    search,
    show_capacity,
    warm_first,
)
from servelab.cli.common import (
    BenchBar,
    SpecAndLedger,
    ledger_option,
    notice,
    resolve_target,
    say,
    spec_option,
)
from servelab.cli.freetext import stored_text
from servelab.cli.options import (
    FORCE_HELP,
    HEADER,
    LoadOptions,
    OutputOptions,
    TargetOptions,
    TraceOptions,
    WorkloadOptions,
    load_options,
    no_ledger_option,
    output_options,
    slo_option,
    target_options,
    trace_options,
    wait_option,
    workload_options,
)
from servelab.cli.proxy import ProxyOptions, proxy_options
from servelab.core.answers.contract import MAX_SHARE, AnswersConfig, probes_per_run
from servelab.core.bench.contract import (
    PLACEHOLDER_MODEL,
    TRACE_LEVEL,
    BenchConfig,
    BenchResult,
    RunResult,
)
from servelab.core.bench.summary import result_so_far
from servelab.core.load.lengths import longest, over_context, over_run
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.load.slo import SLO
from servelab.core.load.trace import TracePlan, TraceWindow, check_replay
from servelab.core.urls import authorized_twice
from servelab.errors import BenchError, HostError, ModelNotListed, OptionError, TraceError
from servelab.io.files import check_directory, write_files
from servelab.io.http.client import ModelList, model_list
from servelab.io.ledger.ledger import Ledger
from servelab.io.lock import Hold
from servelab.io.overwrite import check_overwrite
from servelab.io.room import check_room
from servelab.io.specfile import LoadedSpec
from servelab.io.tracefile import TraceScan, scan_trace
from servelab.ops.bench.bench import run_bench
from servelab.ops.context import Operation
from servelab.ops.deploy.upcheck import refuse_not_serving
from servelab.ops.telemetry.tracing import trace_collector
from servelab.ops.telemetry.watch import metrics_plan
from servelab.report import bench as report
from servelab.report.failures import failure_examples
from servelab.report.runnotes import unsaved_line
from servelab.report.text import AUTHORIZED_TWICE

__all__ = [
    "Exporter",
    "bench_command",
    "bench_config",
    "check_lengths",
    "check_trace",
]


class Exporter:
    """``bench --export DIR``: after every finished run, the files of the runs so far.

    Used as ``run_bench``'s ``save`` callback, so a crash mid-sweep keeps every run done before
    it; :meth:`write` saves the final result. Every file goes through the one atomic writer. A
    write that fails (a disk filled during the sweep) stops nothing: why is kept in ``unsaved``
    (None once a later write succeeds) and said after the result is printed.
    """

    def __init__(self, directory: Path, config: BenchConfig) -> None:
        self.directory = directory
        self.config = config
        self.runs: list[RunResult] = []
        self.unsaved: str | None = None

    def __call__(self, run_result: RunResult) -> None:
        self.runs.append(run_result)
        partial = result_so_far(self.config, self.runs, interrupted=run_result.interrupted)
        self.write(partial)

    def write(self, result: BenchResult) -> None:
        try:
            write_files(self.directory, report.export_files(result))
        except HostError as exc:
            self.unsaved = str(exc)
        except OSError as exc:
            self.unsaved = f"cannot write {self.directory}: {exc.strerror or exc}"
        else:
            self.unsaved = None


async def _bench(
    config: BenchConfig,
    ledger: Ledger | None,
    bar: BenchBar,
    export: Exporter | None,
    loaded: LoadedSpec | None,
    traced: bool = True,
) -> tuple[BenchResult, int | None]:
    """The sweep, and the stop signal that cut it short (None: none); with a spec, every run
    watched through its router's and engines' metrics (the Operation stays open so SSH forwards
    to them live as long as the runs), and with its ``[tracing]`` (unless ``--no-traces``),
    every request joined to its spans. A stop signal ends the current run, which is kept."""
    stop = asyncio.Event()
    with stop_on_signals(stop) as received:
        async with contextlib.AsyncExitStack() as stack:
            plan, traces = None, None
            if loaded is not None:
                op = await stack.enter_async_context(Operation(loaded))
                plan = await metrics_plan(op)
                traces = trace_collector(loaded.spec) if traced else None
            with bar.bar:
                result = await run_bench(
                    config,
                    progress=bar,
                    ledger=ledger,
                    save=export,
                    stop=stop,
                    metrics=plan,
                    traces=traces,
                )
    return result, received[0] if received else None


def _check_export(directory: Path, force: bool, *, capacity: bool) -> None:
    """Before any load: ``directory`` takes a file, on a disk with room for the files (a
    capacity search's: :data:`CAPACITY_BYTES`; a bench's first run's: :data:`EXPORT_BYTES`),
    and holds no file the export would replace (one that holds anything: an
    :class:`OptionError`, exit 2) unless ``--force``. The room is checked first: a disk without
    it is refused before any folder is made (issue 38)."""
    check_room(directory, CAPACITY_BYTES if capacity else EXPORT_BYTES)
    check_directory(directory)
    for name in CAPACITY_NAMES if capacity else report.EXPORT_NAMES:
        check_overwrite(directory / name, force)


def check_trace(plan: TracePlan | None, load: LoadOptions) -> TraceScan | None:
    """Before any load: a trace replays at its own instants (``--rate`` is a usage error; with
    ``--workers N`` its conversations are dealt to N processes on one clock), and the whole
    trace is read once (a bad line stops the
    command, exit 2, an empty window too, and a schedule longer than the replay cap); the
    window's size goes to stderr."""
    if plan is None:
        return None
    if load.rate is not None:
        raise click.UsageError("--trace replays at the trace's own instants: --rate does not "
                               "apply")  # fmt: skip
    scan = scan_trace(Path(plan.path), plan.window, plan.speedup)
    if not scan.requests and plan.window == TraceWindow():  # no window given: the file is empty
        raise click.BadParameter(f"{plan.path} holds no request (no line is a trace entry)",
                                 param_hint="--trace")  # fmt: skip
    if not scan.requests:
        raise click.BadParameter("no conversation of the trace starts in the window",
                                 param_hint="--trace-window")  # fmt: skip
    check_replay(scan.span_ms, plan.speedup)
    span = ((scan.last_ms or 0.0) - (scan.first_ms or 0.0)) / 1e3
    notice("trace:", f"{scan.requests} request(s) in {scan.sessions} conversation(s) starting "
           f"over {span:,.1f} s of trace time, replayed {plan.speedup:g}x as fast")  # fmt: skip
    return scan


def check_lengths(
    workload: WorkloadOptions, scan: TraceScan | None, context_length: int | None, runs: int = 0
) -> None:
    """Before any prompt is built: the longest request fits the model's context (the cap when
    the server does not say it) and a run of ``runs`` requests its bound, exit 2 naming what is
    too long (``core/load/lengths.py``)."""
    if scan is not None:
        if (why := over_context(scan.longest, context_length)) is not None:
            raise TraceError(f"line {scan.longest_line}: {scan.longest:,} tokens (input_length "
                             f"+ output_length), {why}")  # fmt: skip
        return
    tokens = longest(workload.input_len) + longest(workload.output_len)
    if (why := over_context(tokens, context_length)) is not None:
        raise OptionError(f"--input-len + --output-len reach {tokens:,} tokens a request, {why}")
    if (why := over_run(runs, workload.input_len)) is not None:
        raise OptionError(f"--requests {runs:,} of --input-len: {why}")


def _show(result: BenchResult, as_json: bool, signum: int | None, ledger: Path | None,
          unsaved: str | None = None) -> int:  # fmt: skip
    if as_json:
        print_json(report.result_json(result))
    else:
        console.print(report.summary_table(result))
        phases = report.phase_table(result)
        if phases is not None:
            console.print(phases)
        recorded = None if ledger is None else report.recorded_line(result, str(ledger))
        if recorded is not None:
            say(recorded)
    for label, line in report.notices(result):
        notice(label, line)
    for line in report.failure_lines(result):
        notice("failed:", line, "bold red")
    for line in failure_examples(result):
        notice("failed:", line, "bold red")
    if unsaved is not None:
        notice("failed:", unsaved_line(unsaved), "bold red")
    if result.interrupted:
        saved = "shown" if unsaved is not None else "shown and saved"
        err_console.print(f"{interruption(signum)}: partial results {saved}", style="yellow")
        return 128 + (signum or signal.SIGINT)
    if unsaved is not None:
        return EXIT_FAILED
    if (nothing := report.nothing_sent_line(result)) is not None:  # a bench must send to pass
        notice("failed:", nothing, "bold red")
        return EXIT_FAILED
    return EXIT_FAILED if result.n_failed else EXIT_OK


#: The room on the export's disk a bench needs before its first request (its first run's files).
EXPORT_BYTES = 128 * 1024
#: The options of a rate capacity search (what ``--probe-s`` goes with).
RATE_SEARCH = "--find-capacity --rate"


@click.command("bench")
@target_options()
@proxy_options
@spec_option
@load_options()
@workload_options()
@HEADER.option()
@trace_options()
@slo_option()
@click.option(
    "--find-capacity",
    is_flag=True,
    help="Find the largest concurrency (with --rate: arrival rate) meeting --slo: ramp, "
    "bisection, stop at saturation; --concurrency START[,...,MAX] bounds it.",
)
@probe_s_option
@click.option("--label", default="", help="Label stored with the runs.", callback=stored_text)
@click.option(
    "--check-answers",
    is_flag=True,
    help="Mix greedy answer probes (plain, tool-call, long-context retrieval; at most 5% of each "
    "run's requests) into every run at its concurrency and check them against references taken "
    "first at C1: answers that differ, structural failures, recall.",
)
@output_options()
@click.option("--force", is_flag=True, help=FORCE_HELP)
@click.option(
    "--traces/--no-traces",
    default=True,
    show_default=True,
    help="With a spec's [tracing]: receive the router's and engines' spans during each run and "
    "split every request's TTFT into phases.",
)
@ledger_option
@no_ledger_option
@wait_option
def bench_command(
    target: TargetOptions,
    proxy: ProxyOptions,
    spec_path: Path | None,
    load: LoadOptions,
    workload: WorkloadOptions,
    headers: tuple[tuple[str, str], ...],
    trace: TraceOptions,
    slo: SLO | None,
    find_capacity: bool,
    probe_s: float,
    label: str,
    check_answers: bool,
    output: OutputOptions,
    force: bool,
    traces: bool,
    ledger_path: Path | None,
    no_ledger: bool,
    wait: bool,
) -> None:
    """Benchmark streaming completions; exit 0 only when no request failed (--find-capacity:
    when the SLO held at some load).

    Before any load: the entry point answers a model list, ``--export``'s directory takes a file
    and holds none it would replace (unless ``--force``), the ledger takes a write, a ``--trace``
    is read whole; with a spec, the deployment's lock is held (``--wait``)."""
    if force and output.export is None:
        raise click.UsageError("--force goes with --export DIR (it replaces that export's files)")
    if find_capacity and check_answers:
        raise click.UsageError("--check-answers goes with measured runs, not --find-capacity")
    if find_capacity and (slo is None or trace.plan is not None):
        raise click.UsageError("--find-capacity needs --slo and generated load (not --trace)")
    check_probe_s(find_capacity and load.rate is not None, RATE_SEARCH, probe_s, load.deadline_s)
    scan = check_trace(trace.plan, load)
    where = SpecAndLedger(spec_path, ledger_path)
    resolved, loaded, state_dir = resolve_target(where, target.url)
    url = resolved.url
    if authorized_twice(url, headers):
        raise OptionError(AUTHORIZED_TWICE)  # before the model list: aiohttp refuses the pair
    path = proxy.route(url)
    if output.export is not None:
        _check_export(output.export, force, capacity=find_capacity)
    ledger_file = None if no_ledger else where.ledger_path(state_dir)
    with nullcontext() if loaded is None else where.exclusive(wait=wait, kind=Hold.MEASURE):
        if loaded is not None and target.url is None:  # the spec's entry point: up?
            run(refuse_not_serving(loaded, "bench"))  # exit 2 naming each one not ready
        # even with --model: an OpenAI server? (asked the way the load goes)
        listed = _check_models(url, dict(headers), _forward(path))
        check_lengths(workload, scan, listed.context_length, max(load.requests, load.warmup))
        model = target.model or _listed_model(url, listed)
        config = bench_config(load, workload, url=url, model=model, label=label,
                              headers=headers, trace=trace, slo=slo)  # fmt: skip
        config = dataclasses.replace(config, route=None if path == ProxyRoute() else path)
        if check_answers:
            config = _with_answers(config)
        export = None if output.export is None or find_capacity else Exporter(output.export, config)
        with nullcontext(None) if ledger_file is None else Ledger.open(ledger_file) as ledger:
            if ledger is not None:
                ledger.check_writable()
            bar = BenchBar(enabled=err_console.is_terminal)
            if find_capacity:
                warm = warm_first(config)
                searched, signum = run(
                    search(config, ledger, bar, loaded, warm, probe_s), fast=True
                )
                raise SystemExit(show_capacity(searched, output.as_json, output.export, signum))
            result, signum = run(_bench(config, ledger, bar, export, loaded, traces), fast=True)
    if export is not None:
        export.write(result)
    unsaved = None if export is None else export.unsaved
    raise SystemExit(_show(result, output.as_json, signum, ledger_file, unsaved))


def _with_answers(config: BenchConfig) -> BenchConfig:
    """``config`` carrying the answer probes (refused where they cannot go)."""
    if config.trace is not None:
        raise click.UsageError("--check-answers probes generated load, not a --trace replay")
    if not probes_per_run(config.requests, MAX_SHARE, AnswersConfig().probes):
        raise click.UsageError(f"--check-answers needs at least 19 --requests per run (a probe "
                               f"within {MAX_SHARE:.0%} of them)")  # fmt: skip
    try:
        return dataclasses.replace(config, answers=AnswersConfig())
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def _forward(path: ProxyRoute) -> str | None:
    return path.proxy if path.forwarded else None


def _check_models(url: str, headers: dict[str, str], proxy: str | None = None) -> ModelList:
    """The server's model list (asked with the bench's request headers, through ``proxy`` if
    given); a BenchError when it is not an OpenAI server."""
    listed = run(model_list(url, 10.0, headers, proxy))
    if not listed.ok:
        raise BenchError(listed.describe())
    return listed


def _listed_model(url: str, listed: ModelList) -> str:
    """The first model the entry point lists; :class:`ModelNotListed` naming the URL when it
    lists none (no placeholder is sent: smg refuses one, and a router routes by it)."""
    if not listed.models:
        raise ModelNotListed(
            f"GET {url.rstrip('/')}/v1/models lists no model: give the model the entry point "
            "serves with --model (servelab sends no placeholder)"
        )
    return listed.models[0]


def bench_config(
    load: LoadOptions,
    workload: WorkloadOptions,
    *,
    url: str,
    model: str = PLACEHOLDER_MODEL,
    label: str = "",
    headers: tuple[tuple[str, str], ...] = (),
    trace: TraceOptions | None = None,
    slo: SLO | None = None,
) -> BenchConfig:
    """The run's configuration from the load, workload, trace and SLO options (``ab`` measures
    each visit with it too, ``url`` replaced by the router's). A trace replay has one level
    (:func:`check_trace` has refused a rate and worker processes); its trace is recorded by its
    absolute path."""
    plan = None if trace is None else trace.plan
    if plan is not None:  # recorded by its absolute path: a replay of the row reads the same file
        plan = dataclasses.replace(plan, path=str(Path(plan.path).resolve()))
    return BenchConfig(
        url=url,
        concurrencies=(TRACE_LEVEL,) if plan is not None else load.concurrencies,
        requests=load.requests,
        input_len=workload.input_len,
        output_len=workload.output_len,
        repeat=load.repeat,
        rate=load.rate,
        warmup=load.warmup,
        ramp_s=load.ramp_s,
        idle_timeout_s=load.idle_timeout_s,
        deadline_s=load.deadline_s,
        seed=workload.seed,
        model=model,
        label=label,
        endpoint=workload.endpoint,
        workers=load.workers,
        headers=headers,
        slo=slo,
        trace=plan,
    )  # fmt: skip
