"""The ``servelab`` command line. Each command lives in its own module, named in :data:`COMMANDS`.

A command's module is imported only when that command runs: ``servelab sim`` starts without the
bench, the ledger admin or the case machinery, and ``servelab --help`` lists every command from
the table (its name and one-line help) without importing any of them. The group itself needs only
:mod:`servelab.cli.boundary` (the failure boundary), not the spec and ledger machinery of
:mod:`servelab.cli.common`. ``tests/cli/test_lazy_cli.py`` checks that each entry's module exports
the command and that the table's help is the command's own.
"""

from __future__ import annotations

import importlib
import signal
import textwrap
from dataclasses import dataclass
from typing import Any

import click

from servelab.cli.boundary import ServelabGroup, said_all
from servelab.cli.streams import kept_streams
from servelab.startup import STARTUP_HANDLER_MARK, begin

__all__ = ["COMMANDS", "LazyCommand", "LazyServelabGroup", "cli", "main"]


@dataclass(frozen=True)
class LazyCommand:
    """Where a top-level command is (``module:attribute``) and its one-line help, whole (as
    ``get_short_help_str`` gives it without a limit; ``--help`` shortens it as click does)."""

    target: str
    help: str

    def load(self) -> click.Command:
        """Import the command's module and return the command."""
        module, _, attribute = self.target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.target} is not a click command")
        return command


#: Each top-level command: where it is and its one-line help.
COMMANDS = {
    "ab": LazyCommand(
        "servelab.cli.ab:ab_command",
        "A/B a knob: set, co-restart, verify live, measure; counterbalanced rounds; verdict per C.",
    ),
    "bench": LazyCommand(
        "servelab.cli.bench:bench_command",
        "Benchmark streaming completions; exit 0 only when no request failed (--find-capacity: "
        "when the SLO held at some load).",
    ),
    "case": LazyCommand(
        "servelab.cli.case:case_group",
        "Investigate an incident: suspects, evidence, reverts with their cost, verdicts.",
    ),
    "demo": LazyCommand(
        "servelab.cli.demo:demo_command",
        "Tell the reference incident with real commands on the embedded simulated stack.",
    ),
    "down": LazyCommand(
        "servelab.cli.deploy:down_command",
        "Stop SERVICES (default: all) and their dependents, dependents first.",
    ),
    "init": LazyCommand(
        "servelab.cli.init:init_command",
        "Write a spec for the running deployment behind --router.",
    ),
    "investigate": LazyCommand(
        "servelab.cli.investigate:investigate_command",
        "Reproduce, localize, list the suspects, decide each by experiment, resolve and restore.",
    ),
    "knob": LazyCommand(
        "servelab.cli.knob:knob_group",
        "Get, set (atomically, with a backup, recorded) and diff a service's declared knobs.",
    ),
    "ledger": LazyCommand(
        "servelab.cli.ledger:ledger_group",
        "The evidence ledger itself: export, prune, vacuum, stats.",
    ),
    "report": LazyCommand(
        "servelab.cli.case:report_cmd",
        "Write the perf plan, one page per case, plots and an HTML index, from the ledger alone.",
    ),
    "restart": LazyCommand(
        "servelab.cli.deploy:restart_command",
        "Co-restart SERVICES and their dependents (e.g. decode restarts the router too), or, "
        "with --rolling, restart workers one at a time without taking the deployment down.",
    ),
    "restore": LazyCommand(
        "servelab.cli.case:restore_cmd",
        "Apply a resolved case's restore plan: set, co-restart in order, verify live + e2e.",
    ),
    "sim": LazyCommand(
        "servelab.cli.sim:sim_group",
        "The simulated PD engine (SGLang- or vLLM-compatible) and the faulty proxy.",
    ),
    "soak": LazyCommand(
        "servelab.cli.soak:soak_command",
        "Multi-round agentic sessions; detect stalls within bounded time and localize them.",
    ),
    "status": LazyCommand(
        "servelab.cli.deploy:status_command", "Each service: pid, url, readiness answer."
    ),
    "trace": LazyCommand(
        "servelab.cli.trace:trace_group", "Sample traces for bench --trace and ab --trace."
    ),
    "tune": LazyCommand(
        "servelab.cli.tune:tune_command",
        "Find the best setting: arms in blocks, each made live and proven; the worse dropped.",
    ),
    "up": LazyCommand(
        "servelab.cli.deploy:up_command",
        "Start SERVICES (default: all) and their dependencies, in order, each gated on readiness.",
    ),
    "verify": LazyCommand("servelab.cli.verify:verify_command", "Verify SERVICE..."),
}


def _shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters as click cuts a command's help in a list."""
    if len(text) <= limit:
        return text
    if limit < len("..."):
        return "..."
    return textwrap.shorten(text, limit, placeholder="...", break_on_hyphens=False)


class LazyServelabGroup(ServelabGroup):
    """:class:`ServelabGroup` whose commands are imported from :data:`COMMANDS` on first use."""

    def invoke(self, ctx: click.Context) -> Any:
        """While the command runs, Python's own SIGINT handler in place of the quiet one
        ``servelab.__main__`` installs for the imports and for click's own steps around the
        command (exit 130, one line): Ctrl-C gets the command's cleanup, record and hint, and
        ``asyncio`` installs its own handler (it does so only over Python's default)."""
        begin()
        quiet = signal.getsignal(signal.SIGINT)
        if not getattr(quiet, STARTUP_HANDLER_MARK, False):
            return super().invoke(ctx)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return super().invoke(ctx)
        finally:
            signal.signal(signal.SIGINT, quiet)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is not None and cmd_name not in self.commands:
            self.add_command(entry.load(), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help`` from the table: no command's module imported."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, _shortened(COMMANDS[name].help, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyServelabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="servelab")
def cli() -> None:
    """servelab: bring up, verify, benchmark, soak and investigate PD-disaggregated LLM serving."""


def main() -> None:
    """Entry point of the ``servelab`` console script. Its output is kept for the whole process
    (:func:`~servelab.cli.streams.kept_streams`): what click itself prints after a command (a
    usage error, ``--help``) to a reader that left changes no exit code either."""
    with kept_streams() as streams:
        try:
            cli(prog_name="servelab")
        except SystemExit as exc:
            raise SystemExit(said_all(streams, exc.code)) from None
