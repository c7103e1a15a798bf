"""Every command fails in one clear line on stderr (no traceback), with the documented exit code;
``--json`` commands print their JSON document with ``ok: false`` then; read-only commands never
create a ledger. Real processes, real files, real loopback servers."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from servelab.cli import cli
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import load_spec
from tests.support import REPO, free_port
from tests.support.servers import answering_app, served, streaming_app

#: Every command that reads a spec, with the arguments it needs to get that far.
COMMANDS: dict[str, tuple[str, ...]] = {
    "up": ("up",),
    "down": ("down",),
    "status": ("status",),
    "restart": ("restart",),
    "verify": ("verify",),
    "knob get": ("knob", "get", "decode", "X"),
    "knob set": ("knob", "set", "decode", "X=1"),
    "knob diff": ("knob", "diff", "decode", "X"),
    "bench": ("bench",),
    "ab": ("ab", "--knob", "decode:X=1,2"),
    "tune": ("tune", "--knob", "decode:X=1,2"),
    "soak": ("soak",),
    "case open": ("case", "open", "t"),
    "case suspect": ("case", "suspect", "1", "knob:decode/X", "--reason", "r"),
    "case evidence": ("case", "evidence", "1", "--note", "n"),
    "case revert": ("case", "revert", "1", "knob:decode/X", "--yes"),
    "case resolve": ("case", "resolve", "1", "--root-cause", "r"),
    "case test": ("case", "test", "1", "knob:decode/X"),
    "case bisect": ("case", "bisect", "1", "--change", "decode:X=1,2", "--test", "soak"),
    "case show": ("case", "show", "1"),
    "case list": ("case", "list"),
    "restore": ("restore", "1"),
    "investigate": ("investigate", "--yes"),
    "report": ("report",),
    "ledger export": ("ledger", "export"),
    "ledger prune": ("ledger", "prune", "--keep-records", "1"),
    "ledger vacuum": ("ledger", "vacuum"),
    "ledger stats": ("ledger", "stats"),
}

#: Commands that only read the ledger, or need a case already in it: they never create one.
NEEDS_A_LEDGER = [k for k in COMMANDS if k.startswith(("case ", "restore", "report", "ledger"))]
NEEDS_A_LEDGER.remove("case open")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SERVELAB_LEDGER", "SERVELAB_DEBUG")}
    return env | extra


def _run(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "servelab", *args], cwd=cwd, env=_env(), capture_output=True,
        text=True, timeout=timeout, check=False,
    )  # fmt: skip


async def _arun(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "servelab", *args, cwd=cwd, env=_env(),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def _failure_doc(stdout: str) -> dict[str, Any]:
    doc = json.loads(stdout)
    assert doc["ok"] is False and doc["error"], doc
    return dict(doc)


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
    result = _run(*COMMANDS[command], "-f", str(bad), *json_flag, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    line = _one_line(result.stderr)
    assert line.startswith(f"error: {bad}: not valid TOML"), line
    if as_json:
        doc = _failure_doc(result.stdout)
        assert "not valid TOML" in doc["error"] and doc["exit_code"] == 2
    else:
        assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.toml"], "nothing written"


def _newer_ledger(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    return path


async def test_bench_with_a_newer_ledger_is_one_line(tmp_path: Path) -> None:
    ledger = _newer_ledger(tmp_path / "new.db")
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await _arun(
            "bench", "--url", url, "--requests", "1", "--ledger", str(ledger), cwd=tmp_path
        )
    assert code == 1
    line = _one_line(err)
    assert str(ledger) in line and "newer" in line
    assert out == ""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_soak_case_with_a_newer_ledger_is_one_line(as_json: bool, tmp_path: Path) -> None:
    ledger = _newer_ledger(tmp_path / "new.db")
    url = f"http://127.0.0.1:{free_port()}"
    json_flag = ("--json",) if as_json else ()
    result = _run("soak", "--url", url, "--case", "1", "--ledger", str(ledger), *json_flag,
                  cwd=tmp_path)  # fmt: skip
    assert result.returncode == 1
    assert "newer" in _one_line(result.stderr)
    if as_json:
        assert "newer" in _failure_doc(result.stdout)["error"]


async def test_bench_export_to_an_unwritable_path_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("", encoding="utf-8")
    async with served(streaming_app(gap_s=0.001)) as url:
        code, _out, err = await _arun(
            "bench", "--url", url, "--requests", "2", "--no-ledger",
            "--export", str(tmp_path / "afile" / "out"), cwd=tmp_path,
        )  # fmt: skip
    assert code == 1
    line = _one_line(err)
    assert f"cannot write {tmp_path / 'afile' / 'out'}" in line


@pytest.mark.parametrize("out", ["afile", "afile/sub"])
def test_report_to_an_unwritable_path_is_one_line(out: str, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("", encoding="utf-8")
    Ledger.open(tmp_path / "l.db").close()
    result = _run("report", "--out", out, "--ledger", "l.db", cwd=tmp_path)
    assert result.returncode == 1
    assert "cannot write afile" in _one_line(result.stderr)


@pytest.mark.parametrize("command", NEEDS_A_LEDGER)
def test_a_ledger_that_does_not_exist_is_refused_and_not_created(
    command: str, tmp_path: Path
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "l.db"
    result = _run(*COMMANDS[command], "--ledger", str(missing), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line = _one_line(result.stderr)
    assert f"no ledger at {missing}" in line
    assert list(tmp_path.iterdir()) == [], "nothing may be created"


@pytest.mark.parametrize("command", NEEDS_A_LEDGER)
def test_an_empty_file_is_not_a_ledger_and_stays_empty(command: str, tmp_path: Path) -> None:
    """A 0-byte file (``touch``, a wrong path) is refused as a missing one is: SQLite would
    otherwise make it a new ledger under a command that only reads."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = _run(*COMMANDS[command], "--ledger", str(empty), cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert f"no ledger at {empty}: the file is empty" in _one_line(result.stderr)
    assert empty.stat().st_size == 0 and list(tmp_path.iterdir()) == [empty], "nothing written"


#: Commands with an option that fails before ``--json`` is read when ``--json`` comes last.
JSON_LAST = [
    ("bench", "--requests", "-1"),
    ("soak", "--sessions", "0"),
    ("ledger", "prune", "--older-than", "xyz"),
    ("bench", "--concurrency", "zero"),
    ("ledger", "export", "--format", "xml"),
    ("knob", "set", "decode", "X=1", "--case", "abc"),
    ("bench", "--no-such-option"),  # click's parser refuses it before any option is read
    ("ledger", "prune", "--no-such-option"),
]


@pytest.mark.parametrize("args", JSON_LAST, ids=[" ".join(a) for a in JSON_LAST])
def test_json_last_still_prints_the_failure_document(args: tuple[str, ...], tmp_path: Path) -> None:
    result = _run(*args, "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    doc = _failure_doc(result.stdout)
    command = " ".join(a for a in args[:2] if a[0] != "-")
    assert doc["exit_code"] == 2 and doc["command"] == command
    assert doc["error_type"] in ("BadParameter", "NoSuchOption")


def test_json_after_a_separator_is_an_argument_not_the_flag(tmp_path: Path) -> None:
    result = _run("knob", "set", "decode", "--case", "abc", "--", "--json", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "", result.stdout


def test_errors_name_the_spec_file_and_normalised_paths(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    spec = Path("examples") / "local-sim.toml"
    result = _run("knob", "set", "-f", str(spec), "decoder", "X=1", "--ledger", "l.db",
                  cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    line = _one_line(result.stderr)
    assert line.startswith(f"error: {spec}: services: unknown service 'decoder'"), line
    assert "<spec>" not in line
    loaded = load_spec(tmp_path / spec)
    assert loaded.state_dir == tmp_path / ".servelab" / "local-sim"
    result = _run("report", "-f", str(spec), cwd=tmp_path)  # no ledger there yet: refused
    line = _one_line(result.stderr)
    assert f"no ledger at {tmp_path / '.servelab' / 'local-sim' / 'ledger.db'}" in line
    assert "/../" not in line


def _generic_spec(tmp_path: Path, port: int, start: str, **extra: str) -> Path:
    (tmp_path / "env").mkdir(exist_ok=True)
    (tmp_path / "env" / "w.env").write_text("", encoding="utf-8")
    lines = [f"{k} = {v}" for k, v in extra.items()]
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'state_dir = "state"\n[services.w]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = {json.dumps(start)}\n'
        'env_file = "env/w.env"\n' + "\n".join(lines) + "\n",
        encoding="utf-8",
    )
    return spec


async def test_up_on_a_port_clash_prints_its_json_failure(tmp_path: Path) -> None:
    """The port's holder answers, not ready (a listener that never answered held the pre-flight's
    readiness probe for its whole 5 s timeout)."""
    async with served(answering_app(503, "busy", "text/plain")) as url:
        port = int(url.rsplit(":", 1)[1])
        _generic_spec(tmp_path, port, "true")
        code, out, err = await _arun("up", "--json", "--ledger", "l.db", cwd=tmp_path)
    assert code == 1, err
    doc = _failure_doc(out)
    assert doc["command"] == "up" and doc["exit_code"] == 1
    assert str(port) in doc["error"]


def test_up_with_a_bad_env_line_prints_its_json_failure(tmp_path: Path) -> None:
    _generic_spec(tmp_path, free_port(), "true")
    (tmp_path / "env" / "w.env").write_text("A=1\nnot an assignment\n", encoding="utf-8")
    result = _run("up", "--json", "--ledger", "l.db", cwd=tmp_path)
    assert result.returncode in (1, 2), result.stderr
    doc = _failure_doc(result.stdout)
    assert doc["exit_code"] == result.returncode and "w.env" in doc["error"]
    assert "w.env" in _one_line(result.stderr)


#: A server whose every answer is an HTML 404 page and whose every log line is rich markup.
HTML_404_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404)
    def log_message(self, *args):
        sys.stderr.write("[/x] [bold]boom\\n")
        sys.stderr.flush()
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_up_failure_prints_once_as_text_without_raw_html(tmp_path: Path) -> None:
    port = free_port()
    (tmp_path / "server.py").write_text(HTML_404_SERVER, encoding="utf-8")
    start = f"exec {sys.executable} {tmp_path / 'server.py'} {port}"
    _generic_spec(tmp_path, port, start, ready_timeout_s="2", start_timeout_s="1")
    for json_flag in ((), ("--json",)):
        result = _run("up", *json_flag, "--ledger", "l.db", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        err = result.stderr
        assert "Traceback" not in err and "MarkupError" not in err
        assert err.count("not ready after") == 1, err
        assert "[/x] [bold]boom" in err
        assert "<html" not in err.lower() and "<!doctype" not in err.lower(), err
        assert "HTTP 404" in err and "Error response" in err
        if json_flag:
            assert "not ready after" in _failure_doc(result.stdout)["error"]


def test_untrusted_readiness_bodies_print_as_text(tmp_path: Path) -> None:
    port = free_port()
    www = tmp_path / "www"
    www.mkdir()
    (www / "health").write_text("[/x] [bold]ready", encoding="utf-8")
    start = f"exec {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {www}"
    _generic_spec(tmp_path, port, start, ready_timeout_s="20", start_timeout_s="1")
    try:
        up = _run("up", "--ledger", "l.db", cwd=tmp_path)
        assert up.returncode == 0, up.stderr
        status = _run("status", cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert "[/x] [bold]ready" in status.stdout
    finally:
        down = _run("down", "--ledger", "l.db", cwd=tmp_path)
    assert down.returncode == 0, down.stderr


# -- bench --url: the model list first -------------------------------------------------------


HTML = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>hi</body></html>"


@pytest.mark.parametrize(
    ("status", "body", "content_type", "words"),
    [
        (404, HTML, "text/html", ["HTTP 404", "text/html", "Welcome to nginx!"]),
        (200, HTML, "text/html", ["HTTP 200", "text/html", "not an OpenAI model list"]),
        (200, '{"hello": 1}', "application/json", ["application/json", "not an OpenAI model"]),
    ],
    ids=["html-404", "html-200", "json-not-a-list"],
)
async def test_bench_url_that_is_not_an_openai_server_is_one_line(
    status: int, body: str, content_type: str, words: list[str], tmp_path: Path
) -> None:
    async with served(answering_app(status, body, content_type)) as url:
        code, out, err = await _arun("bench", "--url", url, "--no-ledger", cwd=tmp_path)
    assert code == 1
    line = _one_line(err)
    assert f"{url}/v1/models" in line
    for word in words:
        assert word in line
    assert "<html" not in line.lower()
    assert out == ""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
async def test_bench_url_with_nothing_listening_is_one_line(as_json: bool, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    json_flag = ("--json",) if as_json else ()
    code, out, err = await _arun(
        "bench", "--url", url, "--model", "m", "--no-ledger", *json_flag, cwd=tmp_path
    )
    assert code == 1
    line = _one_line(err)
    assert f"{url}/v1/models" in line and "no answer" in line
    if as_json:
        assert "no answer" in _failure_doc(out)["error"]
    else:
        assert out == ""


async def test_bench_url_accepts_the_openai_sdk_base_url(tmp_path: Path) -> None:
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await _arun(
            "bench", "--url", f"{url}/v1/", "--requests", "2", "--no-ledger", "--json",
            cwd=tmp_path,
        )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["url"] == url and doc["config"]["model"] == "sim-model"
