"""``servelab bench``: closed- or open-loop load against a deployment's entry point."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from servelab.cli.common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    console,
    err_console,
    json_option,
    print_json,
    run,
    spec_option,
)
from servelab.core.workload import LengthDist
from servelab.io.http import model_id
from servelab.io.ledger import Ledger, resolve_ledger_path
from servelab.io.specfile import load_spec
from servelab.ops import bench as ops
from servelab.report import bench as report

__all__ = ["parse_concurrency", "parse_length", "register"]


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"64,80,96"`` → ``(64, 80, 96)``; raises ValueError on anything else."""
    values = tuple(int(part) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise ValueError(f"concurrency must be positive integers, got {text!r}")
    return values


def parse_length(text: str) -> LengthDist:
    """``"128"`` (fixed), ``"uniform:128:32"`` (128 ± 32), ``"normal:128:16"`` (mean:std)."""
    parts = text.split(":")
    if len(parts) == 1:
        return LengthDist("fixed", int(parts[0]))
    if len(parts) == 3:
        return LengthDist(parts[0], float(parts[1]), float(parts[2]))
    raise ValueError(f"length must be N, uniform:N:SPREAD or normal:MEAN:STD, got {text!r}")


def _click_parse(
    parser: Callable[[str], Any],
) -> Callable[[click.Context, click.Parameter, str], Any]:
    def callback(_ctx: click.Context, _param: click.Parameter, value: str) -> Any:
        try:
            return parser(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None

    return callback


def _target(url: str | None, spec_path: Path | None) -> tuple[str, Path]:
    """The URL to load and the state dir the ledger lives in.

    ``--url`` alone: that URL. Otherwise the deployment's entry point (proxy, else router) from
    ``-f``, else ``./servelab.toml``, else the embedded default (``--url`` still overrides).
    """
    if url is not None and spec_path is None:
        return url, Path.cwd() / ".servelab"
    loaded = load_spec(spec_path)
    entry = loaded.spec.service(loaded.spec.entry_point)
    return (url or entry.url), loaded.state_dir


class _Bar:
    """The rich progress bar behind the ops progress callback (stderr, so --json stays clean)."""

    def __init__(self, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            disable=not enabled,
            transient=True,
        )
        self._tasks: dict[tuple[str, int, int], Any] = {}

    def __call__(self, event: ops.Progress) -> None:
        key = (event.phase, event.concurrency, event.repeat_index)
        if event.phase == "done":
            return
        if key not in self._tasks:
            label = f"{event.phase} C{event.concurrency} #{event.repeat_index + 1}"
            self._tasks[key] = self.progress.add_task(label, total=event.total)
        self.progress.update(self._tasks[key], completed=event.done)


async def _bench(config: ops.BenchConfig, ledger: Ledger | None, bar: _Bar) -> ops.BenchResult:
    def save(run_result: ops.RunResult) -> None:
        if ledger is not None:
            summary, records = ops.run_payload(run_result)
            ledger.record_bench_run(
                label=config.label or None,
                config=config.to_dict(),
                summary=summary,
                records=records,
            )

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    try:
        with bar.progress:
            return await ops.run_bench(config, progress=bar, save=save, stop=stop)
    finally:
        loop.remove_signal_handler(signal.SIGINT)


def _export(result: ops.BenchResult, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.md").write_text(report.summary_markdown(result), encoding="utf-8")
    (directory / "summary.csv").write_text(report.summary_csv(result), encoding="utf-8")
    (directory / "records.jsonl").write_text(report.records_jsonl(result), encoding="utf-8")
    text = json.dumps(report.result_json(result), indent=2, default=str)
    (directory / "result.json").write_text(text + "\n", encoding="utf-8")


def _show(result: ops.BenchResult, as_json: bool) -> int:
    if as_json:
        print_json(report.result_json(result))
    else:
        console.print(report.summary_table(result))
    for line in report.client_warnings(result):
        err_console.print(f"[yellow]client warning:[/] {line}")
    for line in report.failure_lines(result):
        err_console.print(f"[bold red]failed:[/] {line}")
    if result.interrupted:
        err_console.print("[yellow]interrupted: partial results shown and saved[/]")
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
    "--ledger",
    "ledger_path",
    default=None,
    type=click.Path(path_type=Path),
    help="Ledger file (default: $SERVELAB_LEDGER, else <state_dir>/ledger.db).",
)
@click.option("--no-ledger", is_flag=True, help="Do not record the runs in the ledger.")
@json_option
def bench_command(**opts: Any) -> None:
    """Benchmark streaming completions; exit 0 only when no request failed."""
    url, state_dir = _target(opts["url"], opts["spec_path"])
    model = opts["model"] or run(model_id(url, 10.0)) or "default"
    config = ops.BenchConfig(
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
    )
    ledger = None
    if not opts["no_ledger"]:
        ledger = Ledger.open(resolve_ledger_path(opts["ledger_path"], state_dir))
    try:
        result = run(_bench(config, ledger, _Bar(enabled=err_console.is_terminal)))
    finally:
        if ledger is not None:
            ledger.close()
    if opts["export_dir"] is not None:
        _export(result, opts["export_dir"])
    raise SystemExit(_show(result, opts["as_json"]))


def register(group: click.Group) -> None:
    """Add ``bench`` to the top-level group."""
    group.add_command(bench_command)
