"""The user guide cannot silently go stale: every command and every spec field is documented.

Cheap: no processes, no network. Walks the click group registered in ``servelab.cli`` and the
pydantic models of ``servelab.core.deploy.spec``.
"""

from __future__ import annotations

import re

import click
import pytest

from servelab.cli import cli
from servelab.core.deploy.spec import (
    DeploymentSpec,
    HostSpec,
    PrometheusSpec,
    RouterOptions,
    ServiceSpec,
)
from tests.support import REPO

DOCS = REPO / "docs"
GUIDE = ("index.md", "spec.md", "commands.md", "verify.md", "bench.md", "tune.md", "soak.md",
         "cases.md", "ledger.md", "sim.md", "architecture.md", "signals.md")  # fmt: skip


def _subcommands(group: click.Group) -> dict[str, click.Command]:
    """A group's commands through click's own API (the top-level group loads its modules lazily)."""
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def _commands(group: click.Group, prefix: str = "servelab") -> list[str]:
    """Every command path (``servelab case open``), groups included, depth first."""
    found = []
    for name, command in sorted(_subcommands(group).items()):
        path = f"{prefix} {name}"
        found.append(path)
        if isinstance(command, click.Group):
            found += _commands(command, path)
    return found


def _fields() -> list[tuple[str, str]]:
    models = (DeploymentSpec, HostSpec, PrometheusSpec, RouterOptions, ServiceSpec)
    return [(model.__name__, name) for model in models for name in model.model_fields]


def _flag(option: str) -> str:
    """``--spec`` as a whole flag (not ``--spec-file``, not inside another word)."""
    return r"(?<![\w-])" + re.escape(option) + r"(?![\w-])"


def test_the_walk_finds_commands_and_subcommands() -> None:
    commands = _commands(cli)
    assert "servelab up" in commands
    assert "servelab case open" in commands
    assert len(commands) > 20


@pytest.mark.parametrize("page", GUIDE)
def test_every_page_of_the_guide_exists(page: str) -> None:
    assert (DOCS / page).is_file(), f"docs/{page} is missing"


@pytest.mark.parametrize("command", _commands(cli))
def test_every_command_is_in_commands_md(command: str) -> None:
    text = (DOCS / "commands.md").read_text(encoding="utf-8")
    # As written by a user: `servelab case open ...` (a heading or a code span).
    pattern = re.escape(command) + r"(?![\w-])"
    assert re.search(pattern, text), f"{command!r} is not documented in docs/commands.md"


@pytest.mark.parametrize(("model", "field"), _fields())
def test_every_spec_field_is_in_spec_md(model: str, field: str) -> None:
    text = (DOCS / "spec.md").read_text(encoding="utf-8")
    assert f"`{field}`" in text, f"{model}.{field} is not documented in docs/spec.md"


def test_every_command_option_is_in_commands_md() -> None:
    text = (DOCS / "commands.md").read_text(encoding="utf-8")
    missing = []
    for path in _commands(cli):
        command: click.Command = cli
        for name in path.split()[1:]:
            assert isinstance(command, click.Group)
            command = _subcommands(command)[name]
        for param in command.params:
            if isinstance(param, click.Option):
                longest = max(param.opts, key=len)
                if longest != "--help" and not re.search(_flag(longest), text):
                    missing.append(f"{path} {longest}")
    assert not missing, f"options not documented in docs/commands.md: {missing}"


def test_relative_links_between_pages_resolve() -> None:
    broken = []
    for page in GUIDE:
        text = (DOCS / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", text):
            if not (DOCS / target).is_file():
                broken.append(f"{page} -> {target}")
    assert not broken, f"broken links: {broken}"
