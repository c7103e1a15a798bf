"""The ``servelab`` command line. Each command group lives in its own module and registers here."""

from __future__ import annotations

import importlib

import click

from servelab.cli.common import ServelabGroup

__all__ = ["cli", "main"]

# Modules under servelab.cli that define ``register(group)``; each adds its commands.
_COMMAND_MODULES = (
    "sim",
    "deploy",
    "verify",
    "knob",
    "bench",
    "ab",
    "soak",
    "case",
    "ledger",
    "demo",
)


@click.group(cls=ServelabGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="servelab")
def cli() -> None:
    """servelab: bring up, verify, benchmark, soak and investigate PD-disaggregated LLM serving."""


for _name in _COMMAND_MODULES:
    importlib.import_module(f"servelab.cli.{_name}").register(cli)


def main() -> None:
    """Entry point of the ``servelab`` console script."""
    cli(prog_name="servelab")
