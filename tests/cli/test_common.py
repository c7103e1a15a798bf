"""The CLI's shared seams: the spec+ledger resolver, the target resolver, the progress printer."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from servelab.cli.boundary import DEBUG_ENV, DEBUG_HINT, ServelabGroup, json_option
from servelab.cli.common import (
    SpecAndLedger,
    bench_levels,
    notice,
    progress,
    progress_when,
    resolve_target,
    say,
    show_progress,
)
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.events import ServiceFailed
from servelab.core.load.workload import LengthDist
from servelab.core.verify.events import ReadingEnvFile
from servelab.errors import OptionError, SpecError, StoreError
from servelab.io.ledger.connection import LEDGER_ENV
from servelab.ops.bench.bench import run_bench
from tests.support.servers import served, streaming_app

SPEC = (
    'name = "t"\nstate_dir = "state"\n\n[services.router]\nrole = "router"\n'
    'url = "http://127.0.0.1:9"\nstart = "true"\n'
)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(LEDGER_ENV, raising=False)
    return tmp_path


def test_the_ledger_is_the_option_else_the_env_else_the_spec_state_dir(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "s.toml").write_text(SPEC, encoding="utf-8")
    assert SpecAndLedger(workdir / "s.toml").ledger_path() == workdir / "state" / "ledger.db"
    assert SpecAndLedger(None, Path("x.db")).ledger_path() == Path("x.db")
    assert SpecAndLedger().ledger_path(workdir / "other") == workdir / "other" / "ledger.db"
    monkeypatch.setenv(LEDGER_ENV, str(workdir / "env.db"))
    assert SpecAndLedger(workdir / "s.toml").ledger_path() == workdir / "env.db"
    assert SpecAndLedger(None, Path("x.db")).ledger_path() == Path("x.db")
    with SpecAndLedger().ledger() as ledger:
        assert ledger.path == workdir / "env.db"


def test_the_spec_is_read_only_when_needed_and_writes_nothing(workdir: Path) -> None:
    broken = SpecAndLedger(workdir / "missing.toml", Path("l.db"))
    assert broken.ledger_path() == Path("l.db")  # the ledger is known: the spec is not read
    where = SpecAndLedger()
    assert where.spec() is where.spec() and where.spec().embedded
    assert list(workdir.iterdir()) == []
    where.deployment()
    assert (workdir / ".servelab" / "env" / "decode.env").is_file()


def test_resolve_target_reads_no_spec_for_url_alone(workdir: Path) -> None:
    (workdir / "servelab.toml").write_text(SPEC, encoding="utf-8")
    target, loaded, state_dir = resolve_target(SpecAndLedger(), "http://h:1")
    assert (target.url, target.entry_point, loaded) == ("http://h:1", False, None)
    assert state_dir == workdir / ".servelab"
    target, loaded, state_dir = resolve_target(SpecAndLedger(workdir / "servelab.toml"), None)
    assert (target.url, target.entry_point) == ("http://127.0.0.1:9", True)
    assert loaded is not None and state_dir == workdir / "state"
    target, _, _ = resolve_target(SpecAndLedger(), None)  # ./servelab.toml when no -f
    assert target.url == "http://127.0.0.1:9"


def test_progress_prints_untrusted_text_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    progress("[services] [bold]x[/] restarted")
    progress_when(False)(ReadingEnvFile("never shown"))
    progress_when(True)(ReadingEnvFile("[red]shown[/]"))
    show_progress(ServiceFailed("[b]decode[/b]", "[i]exited[/i]"))
    notice("failed:", "C4: [b]1 failed[/b]")
    say("[dim]result[/]")
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "[services] [bold]x[/] restarted",
        "reading the env file of [red]shown[/]",
        "[b]decode[/b]: failed: [i]exited[/i]",
        "failed: C4: [b]1 failed[/b]",
    ]
    assert out == "[dim]result[/]\n"


def _guarded() -> click.Group:
    @click.group(cls=ServelabGroup)
    def group() -> None:
        pass

    @group.command("boom")
    @json_option
    def boom(as_json: bool) -> None:
        raise ValueError("boom [/x]")

    @group.command("spec")
    def spec() -> None:
        raise SpecError("bad", source="s.toml", path="services")

    @group.command("store")
    @json_option
    def store(as_json: bool) -> None:
        raise StoreError("l.db: locked")

    @group.command("option")
    def option() -> None:
        raise OptionError("expected seconds > 0, got '0'")

    @group.command("interrupt")
    def interrupt() -> None:
        raise KeyboardInterrupt

    @group.command("usage")
    @json_option
    def usage(as_json: bool) -> None:
        raise click.UsageError("give one")

    @group.command("exits")
    def exits() -> None:
        raise SystemExit(3)

    return group


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["boom"], 1, f"error: unexpected ValueError: boom [/x] ({DEBUG_HINT})"),
        (["spec"], 2, "error: s.toml: services: bad"),
        (["option"], 2, "error: expected seconds > 0, got '0'"),
        (["store"], 1, "error: l.db: locked"),
        (["interrupt"], 130, "interrupted"),
        (["exits"], 3, None),
    ],
)
def test_every_command_fails_in_one_line_with_its_exit_code(
    args: list[str], code: int, line: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    result = CliRunner().invoke(_guarded(), args)
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == ([line] if line else [])


def test_json_commands_print_their_failure_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEBUG_ENV, raising=False)
    result = CliRunner().invoke(_guarded(), ["store", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "command": "store", "ok": False, "error": "l.db: locked", "error_type": "StoreError",
        "exit_code": 1,
    }  # fmt: skip
    assert result.stderr.splitlines() == ["error: l.db: locked"]
    result = CliRunner().invoke(_guarded(), ["usage", "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "give one"
    assert "give one" in result.stderr
    assert "Traceback" not in result.stderr


def test_servelab_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEBUG_ENV, "1")
    result = CliRunner().invoke(_guarded(), ["boom"])
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "ValueError: boom [/x]" in result.stderr
    assert result.stderr.splitlines()[-1] == "error: unexpected ValueError: boom [/x]"


async def test_bench_levels_says_each_level_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The A/B's progress: one line per level, not one per concurrent user (C8 ×8)."""
    async with served(streaming_app(gap_s=0.002)) as url:
        config = BenchConfig(url=url, concurrencies=(2, 8), requests=32, model="sim-model",
                             input_len=LengthDist("fixed", 8), output_len=LengthDist("fixed", 5),
                             idle_timeout_s=5.0)  # fmt: skip
        await run_bench(config, progress=bench_levels)
    err = capsys.readouterr().err
    assert err.count("C8: 32 requests measured") == 1, err
    assert err.count("C2: 32 requests measured") == 1, err
