"""Every command fails in one clear line on stderr (no traceback), with the documented exit code;
``--json`` commands print their JSON document with ``ok: false`` then: a spec that is not TOML, for
every command of the deployment and the load that reads one (the case and ledger commands are
tests/cli/test_errors_case_cli.py). Real processes, real files. The other failures are in the
``test_errors_*`` files beside this one (ledgers, ``--json`` placement, ``up``, ``bench --url``),
split so that the parallel pass can give them to different workers."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from servelab.cli import cli
from tests.support.clierrors import (
    CASE_AND_LEDGER,
    COMMANDS,
    DEPLOY_AND_LOAD,
    check_a_bad_spec,
)


def _subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands through click's own API (the top-level group loads its modules lazily)."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in _subcommands(group).items():
        if isinstance(command, click.Group):
            found |= _commands(command, f"{prefix}{name} ")
        else:
            found[prefix + name] = command
    return found


def test_every_command_that_reads_a_spec_is_covered() -> None:
    reading = {
        name
        for name, command in _commands(cli).items()
        if any(param.name == "spec_path" for param in command.params)
    }
    assert reading == set(COMMANDS)
    assert sorted(CASE_AND_LEDGER + DEPLOY_AND_LOAD) == sorted(COMMANDS)  # each file gives its own


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", DEPLOY_AND_LOAD)
def test_a_bad_spec_is_one_line_exit_2_for_every_command(
    command: str, as_json: bool, tmp_path: Path
) -> None:
    check_a_bad_spec(command, as_json, tmp_path)
