"""The user guide cannot silently go stale: every command and every spec field is documented.

Cheap: no processes, no network. Walks the click group registered in ``servelab.cli`` and the
pydantic models of ``servelab.core.deploy.spec``.
"""

from __future__ import annotations

import re

import click
import pytest

from servelab.cli import cli
from servelab.core.deploy.routers import RouterOptions
from servelab.core.deploy.spec import (
    DeploymentSpec,
    HostSpec,
    PrometheusSpec,
    ServiceSpec,
)
from servelab.core.engines import ENGINES
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


def _command_at(words: list[str]) -> tuple[click.Command, int]:
    """The deepest servelab command ``words`` (after ``servelab``) name (the group itself when
    they name none: ``servelab --version``), and how many words it used."""
    command: click.Command = cli
    used = 0
    for word in words:
        if not isinstance(command, click.Group) or word not in _subcommands(command):
            break
        command, used = _subcommands(command)[word], used + 1
    return command, used


def _options_of(command: click.Command) -> set[str]:
    return {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}


def _servelab_lines(text: str) -> list[str]:
    """Every command line the page shows a user typing: a code span or a code block's line that
    starts with ``servelab`` (a shell prompt's ``$`` taken off)."""
    spans = re.findall(r"`(servelab [^`\n]+)`", text)
    blocks = re.findall(r"^\$ (servelab .+)$", text, re.MULTILINE)
    return spans + blocks


def test_every_option_a_command_line_in_commands_md_names_exists() -> None:
    """What commands.md shows a user typing is what the CLI takes: each ``--option`` of a
    ``servelab ...`` line is an option of the command that line names."""
    text = (DOCS / "commands.md").read_text(encoding="utf-8")
    wrong = []
    lines = _servelab_lines(text)
    assert len(lines) > 30
    for line in lines:
        words = line.split()[1:]
        command, used = _command_at(words)
        if used == 0 and words and not words[0].startswith("-") and words[0] != "COMMAND":
            wrong.append(f"{line!r}: no such command")
            continue
        options = line.split(" -- ")[0]  # after `--` come a knob's words, not the command's
        for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", options):
            if flag != "--help" and flag not in _options_of(command):
                wrong.append(f"{line!r}: {command.name} has no {flag}")
    assert not wrong, "docs/commands.md shows options the CLI does not take: " + "; ".join(wrong)


#: A source path docs/architecture.md names (``core/verify/contract.py``, ``ops/deploy/``).
_SOURCE_PATH = re.compile(r"`((?:core|sim|io|ops|report|cli)/[\w/]*?(?:\.py|/))[`.: ]")


def test_every_module_docs_architecture_md_names_exists() -> None:
    """The module map holds: every module or folder it names in a code span exists."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    # a placeholder (``ops/verify/layers/NAME.py``) is in capitals: no module is
    named = {path for path in _SOURCE_PATH.findall(text) if path == path.lower()}
    assert len(named) > 60
    src = REPO / "src" / "servelab"
    missing = sorted(path for path in named if not (src / path).exists())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_folder_in_architecture_md_tree_lists_its_modules() -> None:
    """The tree of docs/architecture.md names every module of core's, io's and ops's folders."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    tree = "core/" + text.split("```\ncore/", 1)[1].split("```", 1)[0]
    layers = dict(re.findall(r"^(\w+)/(.*?)(?=^\w+/|\Z)", tree, re.M | re.S))
    src = REPO / "src" / "servelab"
    missing = []
    for layer in ("core", "io", "ops"):
        for path in sorted((src / layer).glob("*/*.py")):
            if path.name == "__init__.py":
                continue
            folder, name = path.parent.name, path.stem
            section = layers.get(layer, "")
            block = re.search(rf"^  {folder}/ +(.*?)(?=^  \S|\Z)", section, re.M | re.S)
            if block is None or not re.search(rf"(?<![\w/]){name}(?![\w])", block.group(1)):
                missing.append(f"{layer}/{folder}/{name}.py")
    assert not missing, f"docs/architecture.md's tree does not name: {missing}"


#: What the code reads instead of the simulator's own served-request counter (``servelab.
#: requests_served`` in its ``/server_info``): the engines' own counters, named in
#: ``core/engines.py``.
_SERVED_COUNTERS = ("sglang:num_requests_total", "vllm:request_success_total")


@pytest.mark.parametrize("page", ["commands.md", "soak.md", "verify.md"])
def test_the_served_request_counter_is_the_engines_own(page: str) -> None:
    """A feature that counts a worker's requests (a rolling restart's routed phase, the warm-up,
    cold or warm) reads the engine's own counter: no page says it reads the simulator's."""
    text = (DOCS / page).read_text(encoding="utf-8")
    assert "requests_served" not in text and "served-request counter in `/server_info`" not in text
    if page != "verify.md":
        assert all(counter in text for counter in _SERVED_COUNTERS), page


def test_the_engines_served_counters_are_the_ones_the_docs_name() -> None:
    assert {engine.served_counter for engine in ENGINES.values()} == set(_SERVED_COUNTERS)
