"""``servelab bench``: closed- or open-loop load against a deployment's entry point.

Before any load, ``GET /v1/models`` must answer an OpenAI model list; otherwise one line says what
answered (status, content type, an HTML page's title) or that nothing did, and nothing is run.
``--url`` takes a server's base URL or the OpenAI SDK's ``.../v1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from servelab.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BenchBar,
    SpecAndLedger,
    console,
    err_console,
    json_option,
    ledger_option,
    notice,
    print_json,
    resolve_target,
    run,
    spec_option,
)
from servelab.core.options import parse_concurrency, parse_length
from servelab.errors import BenchError
from servelab.io.files import write_files
from servelab.io.http.client import model_list
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.bench import bench as ops
from servelab.ops.context import Operation
from servelab.ops.telemetry.tracing import trace_collector
from servelab.ops.telemetry.watch import metrics_plan
from servelab.report import bench as report

__all__ = ["Exporter", "register"]


def _click_parse(
    parser: Callable[[str], Any],
) -> Callable[[click.Context, click.Parameter, str], Any]:
    def callback(_ctx: click.Context, _param: click.Parameter, value: str) -> Any:
        try:
            return parser(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


class Exporter:
    """``bench --export DIR``: after every finished run, the files of the runs so far.

    Used as ``run_bench``'s ``save`` callback, so a crash mid-sweep keeps every run done before
    it; :meth:`write` saves the final result. Every file goes through the one atomic writer.
    """

    def __init__(self, directory: Path, config: ops.BenchConfig) -> None:
        self.directory = directory
        self.config = config
        self.runs: list[ops.RunResult] = []

    def __call__(self, run_result: ops.RunResult) -> None:
        self.runs.append(run_result)
        partial = ops.result_so_far(self.config, self.runs, interrupted=run_result.interrupted)
        self.write(partial)

    def write(self, result: ops.BenchResult) -> None:
        write_files(self.directory, report.export_files(result))


async def _bench(
    config: ops.BenchConfig,
    ledger: Ledger | None,
    bar: BenchBar,
    export: Exporter | None,
    loaded: LoadedSpec | None,
    traced: bool = True,
) -> ops.BenchResult:
    """The sweep; with a spec, every run watched through its router's and engines' metrics
    (the Operation stays open so SSH forwards to them live as long as the runs), and with its
    ``[tracing]`` (unless ``--no-traces``), every request joined to its spans."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        async with contextlib.AsyncExitStack() as stack:
            plan, traces = None, None
            if loaded is not None:
                op = await stack.enter_async_context(Operation(loaded))
                plan = await metrics_plan(op)
                traces = trace_collector(loaded.spec) if traced else None
            with bar.bar:
                return await ops.run_bench(
                    config,
                    progress=bar,
                    ledger=ledger,
                    save=export,
                    stop=stop,
                    metrics=plan,
                    traces=traces,
                )
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _show(result: ops.BenchResult, as_json: bool) -> int:
    if as_json:
        print_json(report.result_json(result))
    else:
        console.print(report.summary_table(result))
        phases = report.phase_table(result)
        if phases is not None:
            console.print(phases)
    for line in report.phase_lines(result):
        notice("untraced:", line)
    for line in report.return_lines(result):
        notice("return phase:", line)
    for line in report.telemetry_lines(result):
        notice("run telemetry:", line)
    for line in report.client_warnings(result):
        notice("client warning:", line)
    for line in report.failure_lines(result):
        notice("failed:", line, "bold red")
    if result.interrupted:
        err_console.print("interrupted: partial results shown and saved", style="yellow")
        return EXIT_INTERRUPTED
    return EXIT_FAILED if result.n_failed else EXIT_OK


@click.command("bench")
@click.option(
    "--url", default=None, help="Entry point to load (default: the spec's proxy, else its router)."
)
@spec_option
@click.option(
    "--concurrency",
    "concurrency",
    default="1",
    callback=_click_parse(parse_concurrency),
    show_default=True,
    help="Comma-separated concurrency sweep, e.g. 64,80,96.",
)
@click.option(
    "--requests",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Measured requests per run (warm-up excluded).",
)
@click.option(
    "--input-len",
    default="128",
    callback=_click_parse(parse_length),
    show_default=True,
    help="Prompt words≈tokens: N, uniform:N:SPREAD or normal:MEAN:STD.",
)
@click.option(
    "--output-len",
    default="64",
    callback=_click_parse(parse_length),
    show_default=True,
    help="max_tokens (ignore_eos): N, uniform:N:SPREAD or normal:MEAN:STD.",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Runs per concurrency (a Student-t CI needs ≥ 2).",
)
@click.option(
    "--rate",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Open loop: Poisson arrivals per second (concurrency caps in-flight).",
)
@click.option(
    "--warmup",
    default=0,
    show_default=True,
    type=click.IntRange(0),
    help="Warm-up requests per concurrency, not measured.",
)
@click.option(
    "--ramp",
    default=None,
    type=click.FloatRange(0),
    help="Closed loop: seconds over which the users start (default: the warm-up's median E2E; "
    "0: all at once).",
)
@click.option(
    "--idle-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Fail a stream after this many seconds without a byte.",
)
@click.option(
    "--deadline",
    default=None,
    type=click.FloatRange(min=0.001),
    help="Cut each run after this many seconds.",
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Client processes sharing the users on one clock (at most one per user).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Workload seed.")
@click.option("--label", default="", help="Label stored with the runs in the ledger.")
@click.option("--model", default=None, help="Model name (default: the first of /v1/models).")
@click.option(
    "--endpoint",
    default="/v1/chat/completions",
    show_default=True,
    type=click.Choice(["/v1/chat/completions", "/v1/completions"]),
)
@click.option(
    "--export",
    "export_dir",
    default=None,
    type=click.Path(path_type=Path),
    help="Write summary.md, summary.csv, records.jsonl and result.json here.",
)
@click.option(
    "--traces/--no-traces",
    default=True,
    show_default=True,
    help="With a spec's [tracing]: receive the router's and engines' spans during each run and "
    "split every request's TTFT into phases.",
)
@ledger_option
@click.option("--no-ledger", is_flag=True, help="Do not record the runs in the ledger.")
@json_option
def bench_command(**opts: Any) -> None:
    """Benchmark streaming completions; exit 0 only when no request failed."""
    where = SpecAndLedger(opts["spec_path"], opts["ledger_path"])
    target, loaded, state_dir = resolve_target(where, opts["url"])
    url = target.url
    first_model = _check_models(url)  # checked even with --model: is it an OpenAI server?
    model = opts["model"] or first_model or "default"
    config = _config(opts, url, model)
    export = None if opts["export_dir"] is None else Exporter(opts["export_dir"], config)
    ledger = None if opts["no_ledger"] else Ledger.open(where.ledger_path(state_dir))
    try:
        bar = BenchBar(enabled=err_console.is_terminal)
        result = run(_bench(config, ledger, bar, export, loaded, opts["traces"]), fast=True)
    finally:
        if ledger is not None:
            ledger.close()
    if export is not None:
        export.write(result)
    raise SystemExit(_show(result, opts["as_json"]))


def _check_models(url: str) -> str | None:
    """The first model the server lists; a BenchError when it is not an OpenAI server."""
    listed = run(model_list(url, 10.0))
    if not listed.ok:
        raise BenchError(listed.describe())
    return listed.models[0] if listed.models else None


def _config(opts: dict[str, Any], url: str, model: str) -> ops.BenchConfig:
    return ops.BenchConfig(
        url=url,
        concurrencies=opts["concurrency"],
        requests=opts["requests"],
        input_len=opts["input_len"],
        output_len=opts["output_len"],
        repeat=opts["repeat"],
        rate=opts["rate"],
        warmup=opts["warmup"],
        ramp_s=opts["ramp"],
        idle_timeout_s=opts["idle_timeout"],
        deadline_s=opts["deadline"],
        seed=opts["seed"],
        model=model,
        label=opts["label"],
        endpoint=opts["endpoint"],
        workers=opts["workers"],
    )


def register(group: click.Group) -> None:
    """Add ``bench`` to the top-level group."""
    group.add_command(bench_command)
