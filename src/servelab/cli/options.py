"""The options several commands share, each declared once: its flag, its parser (one of
:mod:`servelab.core.options`), its help and its default; and the groups a command takes them in,
each handed to the command as one frozen dataclass instead of loose keyword arguments::

    @click.command("ab")
    @load_options(concurrencies=Default("64,80,96", "the reference incident's levels"))
    @workload_options()
    def ab_command(load: LoadOptions, workload: WorkloadOptions, ...) -> None: ...

Each is a :class:`~servelab.cli.sharedoption.SharedOption` (:mod:`servelab.cli.sharedoption`
says what one is). A command that needs another default passes a
:class:`~servelab.cli.sharedoption.Default`; its help then ends with
``Default here: WHY.`` (click shows the value). ``tests/cli/test_options.py`` walks every command
and checks that an option two commands share is declared, helped, defaulted and parsed alike.
A parser's :class:`~servelab.errors.OptionError` becomes click's usage error naming the option
(exit 2).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from servelab.cli.boundary import json_option
from servelab.cli.sharedoption import Command, Decorator, Default, Parsed, SharedOption
from servelab.core.bounds import MAX_REPEAT, MAX_WORKERS, parse_repeat, parse_workers
from servelab.core.load.trace import DEFAULT_BLOCK_SIZE, TracePlan, TraceWindow
from servelab.core.load.workload import LengthDist
from servelab.core.options import (
    ENDPOINTS,
    MAX_SESSIONS,
    parse_block_size,
    parse_concurrency,
    parse_directory,
    parse_endpoint,
    parse_header,
    parse_length,
    parse_load_rate,
    parse_name,
    parse_positive,
    parse_positive_seconds,
    parse_requests,
    parse_seconds,
    parse_seed,
    parse_sessions,
    parse_slo,
    parse_speedup,
    parse_trace_window,
    parse_warmup,
)
from servelab.core.urls import parse_url
from servelab.errors import OptionError

__all__ = [
    "CASE",
    "CONCURRENCY",
    "DEADLINE",
    "ENDPOINT",
    "EXPORT",
    "HEADER",
    "IDLE_TIMEOUT",
    "INPUT_LEN",
    "MODEL",
    "NO_LEDGER_HELP",
    "OUTPUT_LEN",
    "RAMP",
    "RATE",
    "REPEAT",
    "REQUESTS",
    "REVERT_TO",
    "SEED",
    "SESSIONS",
    "SHARED_OPTIONS",
    "SLO_OPTION",
    "SPEEDUP",
    "TRACE",
    "TRACE_BLOCK_SIZE",
    "TRACE_WINDOW",
    "URL",
    "URL_TYPE",
    "WARMUP",
    "WORKERS",
    "LoadOptions",
    "OutputOptions",
    "TargetOptions",
    "TraceOptions",
    "WorkloadOptions",
    "allow_unread_option",
    "load_options",
    "metric_option",
    "no_ledger_option",
    "output_options",
    "slo_option",
    "target_options",
    "trace_options",
    "wait_option",
    "workload_options",
]


def _path(text: str) -> Path:
    return Path(parse_directory(text))


def _file(text: str) -> Path:
    """A file that exists (read later, as the command goes)."""
    path = Path(text)
    if not text or not path.is_file():
        raise OptionError(f"expected a file, got {text!r}")
    return path


# -- the load: how many requests, how hard, for how long ------------------------------------
CONCURRENCY = SharedOption(
    "--concurrency", "concurrencies", Parsed("LIST", parse_concurrency),
    help="Concurrency levels, comma-separated: 64,80,96 runs a sweep.", default="1",
)  # fmt: skip
REQUESTS = SharedOption(
    "--requests", "requests", Parsed("N", parse_requests),
    help="Measured requests per run (warm-up excluded).", default="100",
)  # fmt: skip
REPEAT = SharedOption(
    "--repeat", "repeat", Parsed("N", parse_repeat),
    help="Runs per concurrency; in an A/B, rounds (each visits both arms once). A Student-t CI "
    f"needs ≥ 2; at most {MAX_REPEAT:,}.", default="1",
)  # fmt: skip
WARMUP = SharedOption(
    "--warmup", "warmup", Parsed("N", parse_warmup),
    help="Warm-up requests per concurrency level, before its runs, not measured.", default="0",
)  # fmt: skip
RAMP = SharedOption(
    "--ramp", "ramp_s", Parsed("SECONDS", parse_seconds),
    help="Closed loop: seconds over which the users start (default: the warm-up's median E2E; "
    "0: all at once).",
)  # fmt: skip
RATE = SharedOption(
    "--rate", "rate", Parsed("PER_SECOND", parse_load_rate),
    help="Open loop: Poisson arrivals per second (the concurrency caps the requests in flight).",
)  # fmt: skip
DEADLINE = SharedOption(
    "--deadline", "deadline_s", Parsed("SECONDS", parse_positive_seconds),
    help="Cut each run after this many seconds.",
)  # fmt: skip
IDLE_TIMEOUT = SharedOption(
    "--idle-timeout", "idle_timeout_s", Parsed("SECONDS", parse_positive_seconds),
    help="Fail a stream after this many seconds without a byte.", default="60",
)  # fmt: skip
WORKERS = SharedOption(
    "--workers", "workers", Parsed("N", parse_workers),
    help="Client processes sharing the users on one clock (at most one per user; 1 to "
    f"{MAX_WORKERS}).", default="1",
)  # fmt: skip

# -- the workload: what each request asks for -----------------------------------------------
INPUT_LEN = SharedOption(
    "--input-len", "input_len", Parsed("LENGTH", parse_length),
    help="Prompt words≈tokens: N, uniform:N:SPREAD or normal:MEAN:STD.", default="128",
)  # fmt: skip
OUTPUT_LEN = SharedOption(
    "--output-len", "output_len", Parsed("LENGTH", parse_length),
    help="max_tokens (with ignore_eos): N, uniform:N:SPREAD or normal:MEAN:STD.", default="64",
)  # fmt: skip
ENDPOINT = SharedOption(
    "--endpoint", "endpoint", Parsed(f"[{'|'.join(ENDPOINTS)}]", parse_endpoint),
    help="The OpenAI endpoint the requests stream from.", default=ENDPOINTS[0],
)  # fmt: skip
SEED = SharedOption(
    "--seed", "seed", Parsed("INTEGER", parse_seed),
    help="Seed of the generated traffic: the same seed sends the same requests.", default="0",
)  # fmt: skip

# -- a recorded trace instead of the generated workload, and the objectives a run is judged by --
TRACE = SharedOption(
    "--trace", "trace", Parsed("FILE", _file),
    help="Replay this Mooncake-format JSONL trace open loop at its recorded instants (its "
    "conversations turn by turn) instead of generated prompts; --concurrency, --requests, "
    "--rate and --input/--output-len do not apply.",
)  # fmt: skip
TRACE_BLOCK_SIZE = SharedOption(
    "--trace-block-size", "block_size", Parsed("TOKENS", parse_block_size),
    help="Tokens per hash id of the --trace.", default=str(DEFAULT_BLOCK_SIZE),
)  # fmt: skip
SPEEDUP = SharedOption(
    "--speedup", "speedup", Parsed("K", parse_speedup),
    help="Replay the --trace K times faster than recorded (its instants and delays over K).",
    default="1",
)  # fmt: skip
TRACE_WINDOW = SharedOption(
    "--trace-window", "window", Parsed("START:END", parse_trace_window),
    help="Replay the conversations of the --trace that start from START to END seconds of "
    "trace time (either may be left out: 600:).",
)  # fmt: skip
SLO_OPTION = SharedOption(
    "--slo", "slo", Parsed("OBJECTIVES", parse_slo),
    help="Judge every run by these objectives, e.g. ttft_p99=2s,itl_p99=60ms,e2e_p99=30s "
    "(any percentile of ttft, itl, tpot, e2e): goodput and SLO attainment.",
)  # fmt: skip

# -- the target: where the requests go ------------------------------------------------------
#: A server's URL, parsed once (:func:`servelab.core.urls.parse_http_url`): ``--url``, ``soak
#: --router-url`` and ``--router-metrics-url`` take it; ``init --router`` its own (credentials
#: refused first).
URL_TYPE: Parsed[str] = Parsed("URL", parse_url)
URL = SharedOption(
    "--url", "url", URL_TYPE,
    help="Entry point to load: any OpenAI-compatible base URL, or its .../v1 (default: the "
    "spec's proxy, else its router).",
)  # fmt: skip
MODEL = SharedOption(
    "--model", "model", Parsed("NAME", parse_name),
    help="Model name (default: the first the entry point's /v1/models lists).",
)  # fmt: skip
HEADER = SharedOption(
    "--header", "headers", Parsed("NAME:VALUE", parse_header),
    help="A request header every request carries (repeatable), e.g. Authorization:Bearer X.",
    multiple=True,
)  # fmt: skip

# -- the output -----------------------------------------------------------------------------
EXPORT = SharedOption(
    "--export", "export", Parsed("DIR", _path),
    help="Write the result's files into DIR (bench: after every run, the runs so far).",
)  # fmt: skip

# -- a soak's sessions; the case a record belongs to; a knob's revert value ------------------
SESSIONS = SharedOption(
    "--sessions", "sessions", Parsed("N", parse_sessions),
    help=f"Concurrent agent sessions (1 to {MAX_SESSIONS}).", default="4",
)  # fmt: skip
CASE = SharedOption(
    "--case", "case_id", Parsed("ID", parse_positive),
    help="Record this under case ID (exit 2 if there is no such case).",
)  # fmt: skip
REVERT_TO = SharedOption(
    "--to", "to_value", Parsed("VALUE", str),
    help="The knob's revert value (default: its value before its last change).",
)  # fmt: skip

#: Every shared option (``docs/commands.md`` documents each once; the test probes each).
SHARED_OPTIONS = (
    CONCURRENCY, REQUESTS, REPEAT, WARMUP, RAMP, RATE, DEADLINE, IDLE_TIMEOUT, WORKERS,
    INPUT_LEN, OUTPUT_LEN, ENDPOINT, SEED, TRACE, TRACE_BLOCK_SIZE, SPEEDUP, TRACE_WINDOW,
    SLO_OPTION, URL, MODEL, HEADER, EXPORT, SESSIONS, CASE, REVERT_TO,
)  # fmt: skip


@dataclass(frozen=True)
class LoadOptions:
    """``--concurrency``, ``--requests``, ``--repeat``, ``--warmup``, ``--ramp``, ``--rate``,
    ``--deadline``, ``--idle-timeout``, ``--workers``, parsed."""

    concurrencies: tuple[int, ...]
    requests: int
    repeat: int
    warmup: int
    ramp_s: float | None
    rate: float | None
    deadline_s: float | None
    idle_timeout_s: float
    workers: int


@dataclass(frozen=True)
class WorkloadOptions:
    """``--input-len``, ``--output-len``, ``--endpoint``, ``--seed``, parsed."""

    input_len: LengthDist
    output_len: LengthDist
    endpoint: str
    seed: int


@dataclass(frozen=True)
class TraceOptions:
    """``--trace``, ``--trace-block-size``, ``--speedup``, ``--trace-window``, parsed."""

    trace: Path | None
    block_size: int
    speedup: float
    window: TraceWindow | None

    @property
    def plan(self) -> TracePlan | None:
        """The replay asked for (None: no ``--trace``)."""
        if self.trace is None:
            return None
        window = self.window or TraceWindow()
        return TracePlan(str(self.trace), self.block_size, self.speedup, window)


@dataclass(frozen=True)
class TargetOptions:
    """``--url`` and ``--model``; None: the spec's entry point, the first model it lists."""

    url: str | None
    model: str | None


@dataclass(frozen=True)
class OutputOptions:
    """``--json`` and ``--export DIR``."""

    as_json: bool
    export: Path | None


def _group(cls: type[Any], param: str, options: Sequence[tuple[str, Decorator]]) -> Decorator:
    """Declare ``options`` (dest, click decorator) in order and hand the command one ``cls``
    built from their values as the keyword argument ``param``."""

    def decorate(func: Command) -> Command:
        @functools.wraps(func)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs[param] = cls(**{dest: kwargs.pop(dest) for dest, _ in options})
            return func(*args, **kwargs)

        declared: Command = command
        for _, declare in reversed(options):  # click lists the last one applied first
            declared = declare(declared)
        return declared

    return decorate


def _shared(
    cls: type[Any], param: str, options: Sequence[SharedOption], defaults: Mapping[str, Default]
) -> Decorator:
    unknown = set(defaults) - {o.dest for o in options}
    if unknown:
        raise TypeError(f"{cls.__name__} has no option {sorted(unknown)}")
    return _group(cls, param, [(o.dest, o.option(defaults.get(o.dest))) for o in options])


def load_options(**defaults: Default) -> Decorator:
    """The load options as ``load: LoadOptions``; ``defaults`` by field (``requests=...``)."""
    options = (CONCURRENCY, REQUESTS, REPEAT, WARMUP, RAMP, RATE, DEADLINE, IDLE_TIMEOUT, WORKERS)
    return _shared(LoadOptions, "load", options, defaults)


def workload_options(**defaults: Default) -> Decorator:
    """The workload options as ``workload: WorkloadOptions``."""
    options = (INPUT_LEN, OUTPUT_LEN, ENDPOINT, SEED)
    return _shared(WorkloadOptions, "workload", options, defaults)


def trace_options() -> Decorator:
    """The trace options as ``trace: TraceOptions``."""
    options = (TRACE, TRACE_BLOCK_SIZE, SPEEDUP, TRACE_WINDOW)
    return _shared(TraceOptions, "trace", options, {})


def metric_option() -> Decorator:
    """``--metric`` as ``metric: str`` (an :class:`~servelab.core.ab.result.AbMetric` value):
    what ``ab`` and ``tune`` compare arms on."""
    from servelab.core.ab.result import AbMetric  # the A/B result's types: only ab and tune pay

    return click.option(
        "--metric", type=click.Choice([m.value for m in AbMetric]),
        default=AbMetric.THROUGHPUT.value, show_default=True,
        help="What the arms are compared on: throughput (output tok/s per C, steady state), "
        "goodput (requests/s meeting --slo per C) or capacity (the largest C, or --rate, meeting "
        "--slo, searched within --concurrency each visit).",
    )  # fmt: skip


def slo_option() -> Decorator:
    """``--slo`` as ``slo: SLO | None``."""
    return SLO_OPTION.option()


def target_options(**defaults: Default) -> Decorator:
    """``--url`` and ``--model`` as ``target: TargetOptions``."""
    return _shared(TargetOptions, "target", (URL, MODEL), defaults)


def output_options() -> Decorator:
    """``--json`` (the one declaration of :func:`~servelab.cli.common.json_option`) and
    ``--export`` as ``output: OutputOptions``."""
    return _group(OutputOptions, "output", [("as_json", json_option), ("export", EXPORT.option())])


#: The help of ``--no-ledger``, the same in every command that takes it.
NO_LEDGER_HELP = "Do not record anything in the ledger (the results are shown, not kept)."


def no_ledger_option(func: Command) -> Command:
    """``--no-ledger`` as ``no_ledger: bool``, one spelling in every command that records what it
    measured (``bench``, ``soak``); ``--no-record`` (``soak``'s older spelling) is its hidden,
    deprecated alias: it still works and click says to use ``--no-ledger``."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        alias = kwargs.pop("no_record_alias")
        kwargs["no_ledger"] = kwargs.pop("no_ledger") or alias
        return func(*args, **kwargs)

    alias = click.option("--no-record", "no_record_alias", is_flag=True, hidden=True,
                         deprecated="use --no-ledger")  # fmt: skip
    return click.option("--no-ledger", "no_ledger", is_flag=True, help=NO_LEDGER_HELP)(
        alias(command)
    )


def allow_unread_option(func: Command) -> Command:
    """``--allow-unread``: A/B or tune a knob the engine's release does not read (refused
    otherwise, naming the variable it does read: such an experiment measures noise)."""
    return click.option(
        "--allow-unread",
        is_flag=True,
        help="Measure a knob the engine's release does not read (refused otherwise: it measures "
        "noise).",
    )(func)


def wait_option(func: Command) -> Command:
    """``--wait``: queue behind the command that holds the deployment's lock instead of refusing
    (every command that changes or measures a deployment takes the lock)."""
    return click.option(
        "--wait",
        is_flag=True,
        help="If another command holds the deployment (its lock), wait for it to end instead of "
        "refusing.",
    )(func)


#: ``--force``'s help, alike on every command that writes a file or a folder (tested).
FORCE_HELP = "Overwrite output that already holds something (links are never written through)."
