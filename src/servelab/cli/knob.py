"""``servelab knob get|set|diff SERVICE NAME[=VALUE]``: a service's declared knobs.

A knob is an env variable or a server argument. An argument comes after ``--`` so that click does
not read it as an option: ``servelab knob set decode -- --max-running-requests=64``; a bare flag
there means ``on``, and the command's own options go before ``--`` (:mod:`servelab.cli.dashdash`).
``set`` edits the file atomically after a timestamped backup and records the change (with
``--reason`` and ``--case``); the new value becomes live only after a restart, and ``set`` says so.
"""

from __future__ import annotations

from pathlib import Path

import click

from servelab.cli.boundary import json_option, print_json, run
from servelab.cli.common import SpecAndLedger, ledger_option, spec_option
from servelab.cli.dashdash import KnobCommand, bare_flag_value
from servelab.cli.freetext import stored_text
from servelab.cli.options import CASE, wait_option
from servelab.core.knobs.contract import KnobChange, KnobDiff, KnobValue
from servelab.core.ledger.codec import encode
from servelab.ops.context import Operation
from servelab.ops.knob import diff_knob, read_knob, set_knob
from servelab.report.knob import render_knob_change, render_knob_diff, render_knob_value

__all__ = [
    "knob_group",
]


@click.group("knob")
def knob_group() -> None:
    """Get, set (atomically, with a backup, recorded) and diff a service's declared knobs."""


async def _get(spec_path: Path | None, service: str, name: str) -> KnobValue:
    async with Operation(SpecAndLedger(spec_path).deployment()) as op:
        return await read_knob(op, service, name)


@knob_group.command("get", cls=KnobCommand)
@click.argument("service")
@click.argument("name")
@spec_option
@json_option
def get_command(service: str, name: str, spec_path: Path | None, as_json: bool) -> None:
    """Print the knob NAME of SERVICE as its file sets it (an argument after ``--``)."""
    got = run(_get(spec_path, service, name))
    if as_json:
        print_json({**encode(got), "env_file": got.path})
    else:
        click.echo(render_knob_value(got), nl=False)


async def _set(
    where: SpecAndLedger,
    service: str,
    name: str,
    value: str | None,
    reason: str | None,
    case_id: int | None,
) -> KnobChange:
    loaded = where.deployment()
    with where.ledger() as ledger:
        async with Operation(loaded, ledger=ledger) as op:
            return await set_knob(op, service, name, value, reason=reason, case_id=case_id)


@knob_group.command("set", cls=KnobCommand)
@click.argument("service")
@click.argument("assignment", metavar="NAME=VALUE")
@click.option(
    "--reason", default=None, help="Why (recorded with the change).", callback=stored_text
)
@CASE.option()
@click.option("--unset", is_flag=True, help="Remove NAME from the env file (give NAME alone).")
@spec_option
@json_option
@ledger_option
@wait_option
def set_command(
    service: str,
    assignment: str,
    reason: str | None,
    case_id: int | None,
    unset: bool,
    spec_path: Path | None,
    as_json: bool,
    ledger_path: Path | None,
    wait: bool,
) -> None:
    """Set NAME=VALUE in SERVICE's file (backup, atomic write, recorded).

    An env knob goes in the env file; an argument (after ``--``: ``-- --max-running-requests=64``,
    a flag ``-- --disable-overlap-schedule``, which means ``=on``) in its args_env variable or its
    config file. Options go before ``--``."""
    name, sep, value = assignment.partition("=")
    if not sep and not unset and (flag := bare_flag_value(name)) is not None:
        value, sep = flag, "="  # a bare flag after `--` means on
    if unset == bool(sep):
        raise click.UsageError("give NAME=VALUE, or NAME with --unset")
    where = SpecAndLedger(spec_path, ledger_path)
    with where.exclusive(wait=wait):
        change = run(_set(where, service, name, None if unset else value, reason, case_id))
    if as_json:
        print_json(encode(change))
    else:
        click.echo(render_knob_change(change, where.spec().spec_args), nl=False)


async def _diff(spec_path: Path | None, service: str, name: str) -> KnobDiff:
    async with Operation(SpecAndLedger(spec_path).deployment()) as op:
        return await diff_knob(op, service, name)


@knob_group.command("diff", cls=KnobCommand)
@click.argument("service")
@click.argument("name")
@spec_option
@json_option
def diff_command(service: str, name: str, spec_path: Path | None, as_json: bool) -> None:
    """Show NAME's value in SERVICE's file, the file's last backup and live, side by side."""
    diff = run(_diff(spec_path, service, name))
    if as_json:
        print_json(encode(diff))
    else:
        click.echo(render_knob_diff(diff), nl=False)
