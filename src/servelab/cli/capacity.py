"""``bench --find-capacity``'s command-line side: the search run with a stop signal (the first
probe warmed up unless ``--warmup`` was typed), and its result shown and exported."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import click
from click.core import ParameterSource

from servelab.cli.boundary import (
    EXIT_FAILED,
    EXIT_OK,
    console,
    err_console,
    interruption,
    print_json,
    stop_on_signals,
)
from servelab.cli.common import BenchBar, notice
from servelab.cli.sharedoption import Parsed
from servelab.core.bench.contract import BenchConfig
from servelab.core.load.capacity import PROBE_REQUESTS, PROBE_SPAN_S, CapacityStop
from servelab.core.options import parse_positive_seconds
from servelab.errors import HostError, OptionError
from servelab.io.files import write_files
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.bench.capacity import CapacityResult, find_capacity, first_probe_warmup
from servelab.ops.context import Operation
from servelab.ops.telemetry.watch import metrics_plan
from servelab.report import capacity as capacity_report
from servelab.report.text import safe_markdown

__all__ = [
    "CAPACITY_BYTES",
    "CAPACITY_NAMES",
    "METRIC_RATE_SEARCH",
    "check_probe_s",
    "probe_s_option",
    "probe_s_typed",
    "search",
    "show_capacity",
    "warm_first",
]

#: The files ``--find-capacity --export DIR`` writes.
CAPACITY_NAMES = ("capacity.md", "capacity.json")
#: The room on the export's disk a search needs before it starts: its files of 12 probes, with
#: their objectives, take tens of KiB.
CAPACITY_BYTES = 128 * 1024


def _probe_span(text: str) -> float:
    """At least 1 s: a shorter rate probe is a burst."""
    value = parse_positive_seconds(text)
    if value < 1:
        raise OptionError(f"expected seconds ≥ 1 (a shorter probe is a burst), got {value:g}")
    return value


#: The options of an A/B's or a tune's rate capacity search (what their ``--probe-s`` goes with).
METRIC_RATE_SEARCH = "--metric capacity --rate"

#: ``--probe-s`` as ``probe_s: float``: a rate probe's span (``bench --find-capacity --rate``,
#: ``ab --metric capacity --rate``: one declaration, one help).
probe_s_option = click.option(
    "--probe-s",
    "probe_s",
    type=Parsed("SECONDS", _probe_span),
    default=f"{PROBE_SPAN_S:g}",
    show_default=True,
    help="With a rate capacity search (bench --find-capacity --rate, ab --metric capacity "
    "--rate): each probe sustains its rate for at least this many seconds of arrivals (more "
    f"requests than --requests when needed, at most {PROBE_REQUESTS:,} or --requests); "
    "--deadline must be longer.",
)


def probe_s_typed() -> bool:
    """Whether ``--probe-s`` was given on the command line (or from the environment)."""
    source = click.get_current_context().get_parameter_source("probe_s")
    return source not in (None, ParameterSource.DEFAULT)


def check_probe_s(rate_search: bool, search: str, probe_s: float, deadline_s: float | None) -> None:
    """Before anything runs: ``--probe-s`` typed only with a rate search (``search`` names its
    options), and a rate search's ``--deadline`` longer than its span: a deadline cuts each probe,
    and one no longer than ``--probe-s`` would cut every rate probe before its span's last
    arrivals are answered (an :class:`OptionError`, exit 2, naming both)."""
    if probe_s_typed() and not rate_search:
        raise click.UsageError(f"--probe-s goes with {search} (a rate probe's span)")
    if rate_search and deadline_s is not None and deadline_s <= probe_s:
        raise OptionError(capacity_report.deadline_refusal(deadline_s, probe_s, probe_s_typed()))


def warm_first(config: BenchConfig) -> bool:
    """Whether the search warms the deployment up before its first probe: ``--warmup`` not
    typed (typed, even ``--warmup 0``, it is honoured: its requests before every probe); said on
    stderr."""
    source = click.get_current_context().get_parameter_source("warmup")
    if source not in (None, ParameterSource.DEFAULT):
        return False
    if n := first_probe_warmup(config):
        notice("warm-up:", capacity_report.warmup_line(n))
    return True


async def search(
    config: BenchConfig,
    ledger: Ledger | None,
    bar: BenchBar,
    loaded: LoadedSpec | None,
    warm: bool,
    span_s: float = PROBE_SPAN_S,
) -> tuple[CapacityResult, int | None]:
    """The capacity search, each probe watched as a bench run is (traces are not received), and
    the stop signal that cut it short (None: none)."""
    stop = asyncio.Event()
    with stop_on_signals(stop) as received:
        async with contextlib.AsyncExitStack() as stack:
            plan = None
            if loaded is not None:
                op = await stack.enter_async_context(Operation(loaded))
                plan = await metrics_plan(op)
            with bar.bar:
                searched = await find_capacity(
                    config, progress=bar, ledger=ledger, stop=stop, metrics=plan,
                    warm_first=warm, span_s=span_s,
                )  # fmt: skip
    return searched, received[0] if received else None


def show_capacity(
    result: CapacityResult, as_json: bool, export: Path | None, signum: int | None
) -> int:
    """Print (and export) the search; its exit code. An export that fails (a disk filled during
    the search) loses nothing printed: the result is shown, then what was not written (exit 1)."""
    unsaved = None if export is None else _export(result, export)
    if as_json:
        print_json(capacity_report.capacity_json(result))
    else:
        if result.capacity.probes:  # none: the conclusion says no probe completed
            console.print(capacity_report.capacity_table(result))
        error = capacity_report.first_error(result)
        words = capacity_report.conclusion_of(result, error)
        console.print(words, markup=False)
    if unsaved is not None:
        notice("failed:", capacity_report.unsaved_line(unsaved), "bold red")
    stop = result.capacity.stop
    if stop == CapacityStop.INTERRUPTED:
        said = capacity_report.interrupted_line(result, interruption(signum))
        err_console.print(said, style="yellow")
        return 128 + (signum or signal.SIGINT)
    failed = stop in (CapacityStop.NEVER_MET, CapacityStop.FAILED) or unsaved is not None
    return EXIT_FAILED if failed else EXIT_OK


def _export(result: CapacityResult, export: Path) -> str | None:
    """Write the search's files in ``export``; why they were not (None: written)."""
    md, doc = CAPACITY_NAMES
    files = {
        md: safe_markdown(capacity_report.capacity_markdown(result)).encode(),
        doc: capacity_report.capacity_json(result).encode(),
    }
    try:
        write_files(export, files)
    except HostError as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot write {export}: {exc.strerror or exc}"
    return None
