"""Every option's bounds read right in ``--help`` (issue 38, eighth hostile pass): a number
option without a bound showed ``x<=None`` (``case test --alpha``, ``sim proxy
--chunk-delay-ms``); and the bounds the pass found missing are there."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from servelab.cli import cli


def _leaves(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    ctx = click.Context(group)
    found: dict[str, click.Command] = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found.update(_leaves(command, f"{prefix}{name} "))
        elif command is not None:
            found[f"{prefix}{name}"] = command
    return found


@pytest.mark.parametrize("path", sorted(_leaves(cli)))
def test_no_help_shows_a_bound_of_none(path: str) -> None:
    result = CliRunner().invoke(cli, [*path.split(), "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "None]" not in result.output and "<=None" not in result.output, result.output
