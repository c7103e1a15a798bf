"""The command table of the lazy top-level group (``servelab.cli.COMMANDS``): every entry names a
module that exports its command, its help is the command's own, ``--help`` lists the commands as
click would with every module loaded, and a process imports only what the command it runs needs
(real ``python -m servelab`` processes)."""

from __future__ import annotations

import ast
import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from servelab.cli import COMMANDS, cli
from tests.support import REPO

CLI_DIR = REPO / "src" / "servelab" / "cli"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_entry_names_a_module_that_exports_its_command(name: str) -> None:
    entry = COMMANDS[name]
    module_name, _, attribute = entry.target.partition(":")
    module = importlib.import_module(module_name)
    assert attribute in module.__all__, f"{entry.target} is not in its module's __all__"
    command = entry.load()
    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str(limit=10_000) == entry.help  # --help lists the command's own


def _top_level_commands(path: Path) -> set[str]:
    """The module-level names of ``path`` bound by a click decorator that makes a top-level
    command (``@click.command``/``@click.group``, not ``@a_group.command``)."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            func = deco.func if isinstance(deco, ast.Call) else deco
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "click"
                and func.attr in ("command", "group")
            ):
                found.add(node.name)
    return found


def test_every_top_level_command_is_in_the_table() -> None:
    targets = {entry.target for entry in COMMANDS.values()}
    declared = {
        f"servelab.cli.{path.stem}:{name}"
        for path in sorted(CLI_DIR.glob("*.py"))
        if path.name != "__init__.py"  # the top-level group itself
        for name in _top_level_commands(path)
    }
    assert declared, "no command found: the scan is broken"
    assert declared == targets


@pytest.mark.parametrize("width", [50, 80, 120, 200])
def test_help_lists_the_commands_as_click_does_with_every_module_loaded(width: int) -> None:
    lazy_ctx = click.Context(cli, info_name="servelab", terminal_width=width)
    lazy = lazy_ctx.make_formatter()
    cli.format_commands(lazy_ctx, lazy)
    loaded = click.Group("servelab", commands={n: e.load() for n, e in COMMANDS.items()})
    eager_ctx = click.Context(loaded, info_name="servelab", terminal_width=width)
    eager = eager_ctx.make_formatter()
    loaded.format_commands(eager_ctx, eager)
    assert lazy.getvalue() == eager.getvalue()
    assert all(name in lazy.getvalue() for name in COMMANDS)


_PROBE = """
import json, sys
from servelab.cli import main
sys.argv = ["servelab", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
others = ("aiohttp", "asyncssh", "grpc", "opentelemetry", "pydantic", "rich", "yaml")
names = [m for m in sys.modules if m.startswith("servelab.") or m in others]
print(json.dumps(sorted(names)), file=sys.stderr)
"""


def _imported(*args: str) -> set[str]:
    """The servelab modules (and aiohttp, asyncssh, grpc, opentelemetry, pydantic, rich, yaml) a
    real process imported to run ``servelab ARGS``."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


#: What ``servelab --help`` and a simulated engine's start do without (about 40, 25 and 10 ms of
#: CPU a process: ``benchmarks/cli_startup.py``): the codec's pydantic, the consoles' rich (made
#: on first use, ``cli/boundary.py``) and PyYAML (a ``--config`` file's parse,
#: ``core/knobs/configyaml.py``).
_HEAVY_FOR_A_START = {"pydantic", "rich", "yaml"}


def _commands_loaded(modules: set[str]) -> set[str]:
    command_modules = {e.target.partition(":")[0] for e in COMMANDS.values()}
    return modules & command_modules


@pytest.mark.parametrize("args", [("--help",), ("--version",)], ids=["help", "version"])
def test_help_and_version_import_no_command_and_no_ledger(args: tuple[str, ...]) -> None:
    modules = _imported(*args)
    assert "servelab.cli.boundary" in modules
    assert _commands_loaded(modules) == set()
    assert "servelab.cli.common" not in modules
    assert not any(m.startswith(("servelab.io.ledger", "servelab.ops")) for m in modules)


def test_a_simulated_worker_imports_no_ledger_and_no_other_command() -> None:
    modules = _imported("sim", "decode", "--help")
    assert _commands_loaded(modules) == {"servelab.cli.sim"}
    assert "servelab.cli.common" not in modules
    assert not any(m.startswith(("servelab.io.ledger", "servelab.ops")) for m in modules)
    assert "servelab.sim.tracing" in modules  # the worker's tracer, whose SDK part waits
    assert "opentelemetry" not in modules  # for an endpoint (sim/otelspans.py)


@pytest.mark.parametrize(
    "args",
    [("--help",), ("--version",), ("sim", "decode", "--help"), ("sim", "prefill", "--help")],
    ids=["help", "version", "sim decode", "sim prefill"],
)
def test_help_and_a_simulated_worker_import_no_pydantic_rich_or_yaml(
    args: tuple[str, ...],
) -> None:
    """The simulator imports all it runs at its module's top (no function-level import in sim/:
    tests/test_architecture.py), so its ``--help`` loads what its start loads, but for the line
    it prints (plain ``click.echo``) and a ``--config`` file's parse."""
    modules = _imported(*args)
    assert modules & _HEAVY_FOR_A_START == set()
    assert "servelab.core.redaction" in modules  # error lines are redacted all the same
    assert "servelab.report.jsontext" in modules  # and --json's failure document printed


@pytest.mark.parametrize("args", [("up", "--help"), ("restart", "--help")], ids=["up", "restart"])
def test_deploy_imports_no_other_features_progress_events(args: tuple[str, ...]) -> None:
    """``up``/``restart`` tell deploy's own events; every feature's (``core/progress.py``: A/B,
    tune, soak, bisect...) and their words come with printing them (``cli/common.py``)."""
    modules = _imported(*args)
    assert "servelab.ops.deploy.deploy" in modules and "servelab.report.deploy" in modules
    assert "servelab.core.progress" not in modules and "servelab.report.progress" not in modules
    assert not any(m.startswith(("servelab.core.ab", "servelab.core.soak.events")) for m in modules)


def test_a_command_that_prints_tables_still_gets_its_consoles() -> None:
    modules = _imported("ledger", "stats", "--help")
    assert {"pydantic", "rich"} <= modules  # the ledger's records, and the consoles on use


def test_a_command_imports_its_own_module_only_and_no_ssh_client() -> None:
    modules = _imported("status", "--help")
    assert _commands_loaded(modules) == {"servelab.cli.deploy"}
    assert "servelab.ops.context" in modules  # the operation context, which makes the hosts
    assert "asyncssh" not in modules  # imported by io/hosts/host.host_for for a remote host only


def test_bench_imports_no_trace_receiver_until_a_spec_asks_for_traces() -> None:
    modules = _imported("bench", "--help")
    assert _commands_loaded(modules) == {"servelab.cli.bench"}
    assert "servelab.ops.telemetry.tracing" in modules  # the collector, whose receiver (grpc)
    assert "grpc" not in modules and "servelab.io.otlp" not in modules  # waits for [tracing]


_NO_ENGINE_ASKED = [
    ("knob", "get", "--help"),
    ("ledger", "stats", "--help"),
    ("case", "show", "--help"),
]


@pytest.mark.parametrize("args", _NO_ENGINE_ASKED, ids=lambda a: " ".join(a[:2]))
def test_a_command_that_asks_no_engine_imports_no_http_client(args: tuple[str, ...]) -> None:
    modules = _imported(*args)
    assert _commands_loaded(modules) == {COMMANDS[args[0]].target.partition(":")[0]}
    assert "aiohttp" not in modules and "servelab.io.http.client" not in modules
    assert "servelab.core.progress" not in modules  # every feature's events: printing imports them
    assert "servelab.cli.caseexperiment" not in modules  # case test/bisect: when asked for


@pytest.mark.parametrize("args", _NO_ENGINE_ASKED[:2], ids=lambda a: " ".join(a[:2]))
def test_the_ledger_imports_the_ab_and_soak_results_only_for_their_records(
    args: tuple[str, ...],
) -> None:
    modules = _imported(*args)
    assert "servelab.io.ledger.ledger" in modules
    assert "servelab.core.ab.result" not in modules and "servelab.core.soak.result" not in modules


@pytest.mark.parametrize("args", _NO_ENGINE_ASKED[:2], ids=lambda a: " ".join(a[:2]))
def test_the_ledger_imports_the_verification_records_only_for_them(args: tuple[str, ...]) -> None:
    """Verify's records (its checks, with the answers and SSE parsers) are imported by a command
    that reads or writes a verification, not by every one that opens the ledger."""
    modules = _imported(*args)
    assert "servelab.io.ledger.ledger" in modules
    assert not any(m.startswith("servelab.core.verify") for m in modules), sorted(
        m for m in modules if m.startswith("servelab.core.verify")
    )
    assert "servelab.report.verify" not in modules


def test_case_lists_its_experiments_and_loads_them_when_asked() -> None:
    modules = _imported("case", "test", "--help")
    assert "servelab.cli.caseexperiment" in modules
    group = COMMANDS["case"].load()
    assert isinstance(group, click.Group)
    ctx = click.Context(group, info_name="case")
    assert {"test", "bisect", "show"} <= set(group.list_commands(ctx))
    assert all(group.get_command(ctx, name) is not None for name in ("test", "bisect"))


def test_a_real_knob_get_imports_no_http_client(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples" / "env", tmp_path / "env")
    shutil.copy(REPO / "examples" / "local-sim.toml", tmp_path / "servelab.toml")
    spec = str(tmp_path / "servelab.toml")
    modules = _imported("knob", "get", "-f", spec, "decode", "SGLANG_SM120_MMA_TARGET_CTAS")
    assert "servelab.ops.knob" in modules  # it ran: read the env file, asked no engine
    assert "aiohttp" not in modules and "servelab.core.progress" not in modules
