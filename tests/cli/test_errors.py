"""Every command fails in one clear line on stderr (no traceback), with the documented exit code;
``--json`` commands print their JSON document with ``ok: false`` then: a spec that is not TOML, for
every command that reads one. Real processes, real files. The other failures are in the
``test_errors_*`` files beside this one (ledgers, ``--json`` placement, ``up``, ``bench --url``),
split so that the parallel pass can give them to different workers."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from servelab.cli import cli
from tests.support.clierrors import (
    COMMANDS,
    failure_doc,
    one_line,
    run,
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


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_spec_is_one_line_exit_2_for_every_command(
    command: str, as_json: bool, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[services\n", encoding="utf-8")
    json_flag = ("--json",) if as_json else ()
    result = run(*COMMANDS[command], "-f", str(bad), *json_flag, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert line.startswith(f"error: {bad}: not valid TOML"), line
    if as_json:
        doc = failure_doc(result.stdout)
        assert "not valid TOML" in doc["error"] and doc["exit_code"] == 2
    else:
        assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"], "nothing written"
