"""What an engine answers is quoted through the one redaction policy (issue 38's seventh pass,
H2): a hostile engine (``tests/support/hostile_engine.py``, a real process run as the spec's
service) whose ``/health`` body holds tokens. ``up --json``, ``status --json``, plain ``status``,
the ledger's ``deployments`` row and ``ledger export`` show the body with the tokens masked: the
readiness answer is masked in the typed result, so every path gets the masked text."""

from __future__ import annotations

import json
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, free_port, run_cli
from tests.support.hostile_engine import HEALTH_SECRETS
from tests.support.processes import live_procs_under, wait_answering


def _spec(root: Path) -> Path:
    port = free_port()
    start = f"cd {shlex.quote(str(REPO))} && exec {shlex.quote(sys.executable)} -m " + (
        f"tests.support.hostile_engine {port}"
    )
    spec = root / "servelab.toml"
    spec.write_text(
        'name = "hostile"\nstate_dir = "state"\n[services.engine]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nready_path = "/health"\nstart = {start!r}\n'
    )
    (root / "env").mkdir()
    return spec


def _cli(root: Path, *args: str, codes: tuple[int, ...] = (0,)) -> str:
    done: subprocess.CompletedProcess[str] = run_cli(
        *args, cwd=root, env={"SERVELAB_LEDGER": str(root / "ledger.db")}, timeout=90
    )
    assert done.returncode in codes, f"{args}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def _leaked(text: str) -> list[str]:
    return [secret for secret in HEALTH_SECRETS if secret in text]


@pytest.mark.timeout(180)
def test_a_token_in_an_engines_health_body_is_masked_everywhere(tmp_path: Path) -> None:
    _spec(tmp_path)
    said: dict[str, str] = {}
    try:
        said["up --json"] = _cli(tmp_path, "up", "--json")
        said["status --json"] = _cli(tmp_path, "status", "--json")
        said["status"] = _cli(tmp_path, "status")
        said["ledger export"] = _cli(tmp_path, "ledger", "export", "--json")
        said["ledger export jsonl"] = _cli(tmp_path, "ledger", "export", "--format", "jsonl")
    finally:
        said["down"] = _cli(tmp_path, "down", codes=(0, 1))
    assert live_procs_under(tmp_path) == []
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        rows = [" ".join(map(str, row)) for row in db.execute("SELECT * FROM deployments")]
    said["deployments rows"] = "\n".join(rows)
    for ledger in tmp_path.glob("ledger.db*"):  # the main file and any -wal left
        said[ledger.name] = ledger.read_bytes().decode("latin-1")
    assert {what: _leaked(text) for what, text in said.items() if _leaked(text)} == {}
    # the body is quoted (masked), not dropped: the answer's shape is still evidence
    assert '\\"token\\": ***' in said["up --json"], said["up --json"]
    assert '\\"token\\": ***' in said["status --json"], said["status --json"]
    assert '"token": ***' in said["status"], said["status"]
    assert any('\\"token\\": ***' in row for row in rows), rows


@pytest.mark.timeout(120)
def test_a_token_in_an_engines_error_answer_is_masked_in_a_bench(tmp_path: Path) -> None:
    """An engine that answers every request 500 with a token in its error message: ``bench``
    records each request's failure with the engine's words quoted, the token masked (its
    ``--json`` and the ledger's request records)."""
    token = HEALTH_SECRETS[0]
    body = json.dumps({"error": {"message": f"upstream refused key {token} for this request"}})
    port = free_port()
    app = subprocess.Popen(
        [sys.executable, "-c", _ANSWERING, str(port), body], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_answering(f"http://127.0.0.1:{port}/v1/models", app, 60)
        said = _cli(tmp_path, "bench", "--url", f"http://127.0.0.1:{port}", "--model", "m",
                    "--requests", "2", "--output-len", "4", "--json", codes=(1,))  # fmt: skip
    finally:
        app.kill()
        app.wait(10)
    texts = {"bench --json": said}
    for ledger in tmp_path.glob("ledger.db*"):
        texts[ledger.name] = ledger.read_bytes().decode("latin-1")
    assert {what: _leaked(text) for what, text in texts.items() if _leaked(text)} == {}
    assert any("upstream refused key ***" in text for text in texts.values())  # quoted, masked


#: ``/v1/models`` lists a model; every other request is answered 500 with ``argv[2]`` (a real
#: process).
_ANSWERING = """
import sys
from aiohttp import web
async def models(_request):
    return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
async def refuse(_request):
    return web.Response(status=500, text=sys.argv[2], content_type="application/json")
app = web.Application()
app.router.add_get("/v1/models", models)
app.router.add_route("*", "/{tail:.*}", refuse)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
