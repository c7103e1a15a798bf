"""Argument knobs through get/set/diff: the args_env variable and the --config file, edited with
backups and records, and read live from a real process's command line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from servelab.core.knobs.record import KnobChangeRecord
from servelab.errors import KnobError
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.knob import diff_knob, get_knob, live_knob, set_knob
from tests.support import free_port
from tests.support.processes import wait_answering

MRR = "--max-running-requests"
OVERLAP = "--disable-overlap-schedule"
TOPK = "--json-model-override-args.index_topk"
ENV = "# decode\nSGLANG_ARGS=--port 1 --max-running-requests 64\nTOKEN=secret\n"
YAML = "# decode engine\nchunked-prefill-size: 4096  # tuned\nmax-running-requests: 32\n"
SERVE = ("import sys, http.server as h; h.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), "
         "h.SimpleHTTPRequestHandler).serve_forever()")  # fmt: skip


def _spec(root: Path, port: int, *, args_env: bool = True, config: bool = True) -> LoadedSpec:
    (root / "env").mkdir(exist_ok=True)
    (root / "env" / "decode.env").write_text(ENV)
    (root / "decode.yaml").write_text(YAML)
    lines = ['state_dir = "state"', "[services.decode]", 'role = "generic"',
             f'url = "http://127.0.0.1:{port}"', 'start = "true"', 'env_file = "env/decode.env"',
             f'knobs = ["{MRR}", "{OVERLAP}", "{TOPK}", "--chunked-prefill-size"]']  # fmt: skip
    lines += ['args_env = "SGLANG_ARGS"'] if args_env else []
    lines += ['config_file = "decode.yaml"'] if config else []
    (root / "servelab.toml").write_text("\n".join(lines) + "\n")
    return load_spec(root / "servelab.toml")


async def test_a_set_edits_the_args_env_variable_with_a_backup_and_a_record(tmp_path: Path) -> None:
    loaded = _spec(tmp_path, free_port())
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        change = await set_knob(loaded, "decode", MRR, "128", reason="a/b", ledger=ledger)
        assert (change.old, change.new, change.place, change.changed) == (
            "64",
            "128",
            "args_env",
            True,
        )
        # the value is quoted as systemd's EnvironmentFile= syntax wants it; other lines stay
        assert (tmp_path / "env" / "decode.env").read_text() == ENV.replace(
            "SGLANG_ARGS=--port 1 --max-running-requests 64",
            'SGLANG_ARGS="--port 1 --max-running-requests 128"',
        )
        assert change.backup_path is not None and Path(change.backup_path).read_text() == ENV
        assert change.change_id is not None
        row = ledger.get(KnobChangeRecord, change.change_id)
        assert row is not None and (row.name, row.old, row.new) == (MRR, "64", "128")
        first = await diff_knob(loaded, "decode", MRR)
        assert (first.file, first.backup, first.backup_path) == ("128", "64", change.backup_path)
        flag = await set_knob(loaded, "decode", OVERLAP, "true", ledger=ledger)
        assert (
            flag.new == "on"
            and "--disable-overlap-schedule" in (tmp_path / "env" / "decode.env").read_text()
        )
        topk = await set_knob(loaded, "decode", TOPK, "1024", ledger=ledger)
        assert topk.place == "args_env" and await get_knob(loaded, "decode", TOPK) == "1024"
        again = await set_knob(loaded, "decode", MRR, "128", ledger=ledger)
        assert not again.changed and again.change_id is None
    # the YAML file is untouched: args_env is where the knob was, and it wins
    assert (tmp_path / "decode.yaml").read_text() == YAML
    diff = await diff_knob(loaded, "decode", MRR)
    # the backup is the file before its last change (the JSON key's), which held 128 already
    assert (diff.file, diff.place, diff.backup) == ("128", "args_env", "128")
    assert diff.shadowed == (("config_file", "32"),)


async def test_a_set_edits_the_config_file_where_the_knob_lives_only_there(tmp_path: Path) -> None:
    loaded = _spec(tmp_path, free_port())
    change = await set_knob(loaded, "decode", "--chunked-prefill-size", "8192")
    assert (change.old, change.place) == ("4096", "config_file")
    text = (tmp_path / "decode.yaml").read_text()
    assert text == YAML.replace("4096  #", "8192  #")  # its comment and other lines kept
    assert yaml.safe_load(text)["chunked-prefill-size"] == 8192
    assert change.backup_path is not None and Path(change.backup_path).read_text() == YAML
    # without args_env, a knob named nowhere goes to the config file; off removes the flag's key
    (tmp_path / "c").mkdir()
    only_config = _spec(tmp_path / "c", free_port(), args_env=False)
    await set_knob(only_config, "decode", OVERLAP, "on")
    assert "disable-overlap-schedule: true" in (tmp_path / "c" / "decode.yaml").read_text()
    await set_knob(only_config, "decode", OVERLAP, "off")
    assert "disable-overlap-schedule" not in (tmp_path / "c" / "decode.yaml").read_text()
    assert await get_knob(only_config, "decode", OVERLAP) == "off"


async def test_with_nowhere_to_write_nothing_is_touched(tmp_path: Path) -> None:
    loaded = _spec(tmp_path, free_port(), args_env=False, config=False)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        with pytest.raises(KnobError, match="names no place for its arguments"):
            await set_knob(loaded, "decode", MRR, "8", ledger=ledger)
        assert ledger.list(KnobChangeRecord, service="decode") == []
    assert (tmp_path / "env" / "decode.env").read_text() == ENV
    assert not (tmp_path / "state").exists()


async def test_a_flag_takes_on_or_off_only(tmp_path: Path) -> None:
    loaded = _spec(tmp_path, free_port())
    with pytest.raises(KnobError, match="on or off"):
        await set_knob(loaded, "decode", OVERLAP, "64")
    assert (tmp_path / "env" / "decode.env").read_text() == ENV


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[LoadedSpec, subprocess.Popen[bytes]]]:
    """A real process on the spec's port, started with the args_env words it expands."""
    port = free_port()
    loaded = _spec(tmp_path, port)
    words = ["--max-running-requests", "64", "--config", "decode.yaml", "--api-key", "k"]
    proc = subprocess.Popen([sys.executable, "-c", SERVE, str(port), *words], cwd=tmp_path)
    try:
        wait_answering(f"http://127.0.0.1:{port}/", proc, 15)
        yield loaded, proc
    finally:
        proc.terminate()
        proc.wait(5)


async def test_live_values_come_from_the_command_line_and_its_config(
    serving: tuple[LoadedSpec, subprocess.Popen[bytes]],
) -> None:
    loaded, _ = serving
    assert await live_knob(loaded, "decode", MRR) == "64"
    assert await live_knob(loaded, "decode", "--chunked-prefill-size") == "4096"
    assert await live_knob(loaded, "decode", OVERLAP) == "off"
    change = await set_knob(loaded, "decode", MRR, "128")
    assert change.running and change.live == "64" and change.restart_needed
    diff = await diff_knob(loaded, "decode", MRR)
    assert (diff.file, diff.live, diff.backup) == ("128", "64", "64")
