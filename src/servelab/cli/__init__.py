"""The ``servelab`` command line. Each command group lives in its own module and registers here.

A module is imported only when one of its commands runs (or when the whole list is asked for, as
``servelab --help`` does): ``servelab sim`` starts without the bench, the ledger admin or the
case machinery, which saves every simulated worker and every short command about a second of CPU.
"""

from __future__ import annotations

import importlib
import signal
from typing import Any

import click

from servelab.__main__ import STARTUP_HANDLER_MARK
from servelab.cli.common import ServelabGroup

__all__ = ["COMMANDS", "LazyServelabGroup", "cli", "main"]

#: Each top-level command and the module under servelab.cli whose ``register(group)`` adds it.
COMMANDS = {
    "sim": "sim",
    "up": "deploy",
    "down": "deploy",
    "status": "deploy",
    "restart": "deploy",
    "verify": "verify",
    "knob": "knob",
    "bench": "bench",
    "ab": "ab",
    "tune": "tune",
    "soak": "soak",
    "case": "case",
    "investigate": "investigate",
    "report": "case",
    "restore": "case",
    "ledger": "ledger",
    "trace": "trace",
    "demo": "demo",
    "init": "init",
}


class LazyServelabGroup(ServelabGroup):
    """:class:`ServelabGroup` whose commands are registered by their module on first use."""

    def invoke(self, ctx: click.Context) -> Any:
        """While the command runs, Python's own SIGINT handler in place of the quiet one
        ``servelab.__main__`` installs for the imports and for click's own steps around the
        command (exit 130, one line): Ctrl-C gets the command's cleanup, record and hint, and
        ``asyncio`` installs its own handler (it does so only over Python's default)."""
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
        module = COMMANDS.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"servelab.cli.{module}").register(self)
        return self.commands.get(cmd_name)


@click.group(cls=LazyServelabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="servelab")
def cli() -> None:
    """servelab: bring up, verify, benchmark, soak and investigate PD-disaggregated LLM serving."""


def main() -> None:
    """Entry point of the ``servelab`` console script."""
    cli(prog_name="servelab")
