"""No env value leaks out of servelab, whatever the command and whichever way it ends.

Secret-looking values are planted under ORDINARY names (no redaction by name can catch them) in
every env file of a real local simulated deployment (sim prefill and decode, the real
sglang-router), and also as a malformed line (``NAME VALUE`` without ``=``). Then every command
runs as a real process, on its success path and on a failure path: up, restart, verify, knob
get/set/diff, bench, ab (small), soak (short), case open/suspect/revert/resolve/evidence/list,
restore, report, ledger export/stats/prune/vacuum, trace generate, tune --plan, init (case test and
case bisect on their failure path only: each of their visits restarts a service), and the
simulator's own usage errors (``sim decode --api-key ...``, ``sim prefill --config`` of a malformed
file holding a key); ``bench`` sends session and access headers (``X-Session-Id``, ``X-Access``).
A declared knob whose name looks secret (``ENGINE_API_KEY``) holds a planted value too, and
``knob set`` writes another: ``knob get|set|diff``, ``verify`` and the ledger show and store
``***``. Every command of the click group is run but those in :data:`NOT_RUN` (each with its
reason): a new command fails this test until it is added. Scanned for every planted value:

- every command's stdout and stderr;
- the ledger's bytes: the main file AND its ``-wal`` (a reader held open by the test keeps the WAL
  from being checkpointed away, and the WAL is read after every command);
- the report files (``report``, ``ab --out``, ``bench --export``);
- every file servelab wrote under the state directory (pid records, status files, ...).

Not scanned, on purpose: the logs of the services themselves (``<state>/logs/``): they are the
services' own output (a service may print its environment; servelab only appends a start stamp,
and redacts every env value of the service in the tail it quotes when the service fails: the
second test plants values in services that print their environment),
and the env files and their backups (``NAME.env.bak-*``, ``.pre-restart-*``, ``.launched-*``):
they are the secrets' home. One stack is shared by the whole test, with small requests and a
short soak.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_port, run_cli
from tests.support.processes import live_procs_under
from tests.support.specs import write_pd_spec

K = DEFAULT_KNOB
TARGET = f"knob:decode/{K}"
PLANTED = {
    "prefill": {"MODEL_CACHE_KEY": "sk-live-7Qm2xZpL9wVb", "WARM_POOL": "pool-8811-zeta"},
    "decode": {"PATH_HINT": "hf_Yt4kPq8sNcR2", "STORE_URL": "postgres://ops:Kd93vX@db/serve"},
    "router": {"UPSTREAM_NOTE": "ghp_R7bN2mQx4Lw9", "ROUTE_SALT": "salt-0a9f3c1d"},
}
MALFORMED = "hf_malformedZ8v1Ew"  # written as `HF_TOKEN hf_...` (no `=`)
#: A DECLARED knob whose name looks secret (M1 of issue 38's later pass: knob get/set/diff,
#: verify and the ledger showed and stored its value), its value and the one ``knob set`` writes.
SECRET_KNOB = "ENGINE_API_KEY"
KNOB_SECRET, KNOB_SECRET_NEW = "sk-knob-Vb82nQx4Lw", "sk-knob-new-Hz7pT3cW"
#: Request headers whose names say a session or an access grant (issue 38, the tenth pass: a
#: ``bench --header`` stored them verbatim in ``--json`` and the ledger), ordinary-looking values.
HEADERS = {"X-Session-Id": "sess-4Qw9Zr7Lp2", "X-Access": "acc-Tq5Wn8Yx3V"}
#: What the simulator is given on its command line and in a malformed ``--config`` (its stderr
#: quoted both: "unrecognized arguments: --api-key sk-...", the YAML error's line).
SIM_SECRETS = ("sk-simArg-Pq72Lx9Wm", "sk-simYaml-Ne48Rt2Vb")
VALUES = [v for env in PLANTED.values() for v in env.values()]
VALUES += [MALFORMED, KNOB_SECRET, KNOB_SECRET_NEW, *HEADERS.values(), *SIM_SECRETS]
#: The commands this test does not run, and why; any other command of the click group missing
#: from the test fails it (``test_no_planted_value_leaks_from_any_command``).
NOT_RUN = {
    "sim proxy": "the simulated faulty proxy: it reads no env file, spec or ledger",
    "demo": "its own throw-away deployment in a temporary folder: no user input to plant",
}
_BACKUP = re.compile(r"\.env\.(bak|pre-restart|launched)-")


@dataclass
class Scan:
    """Everything servelab said or wrote that the test will scan, gathered as the test goes."""

    root: Path
    ledger: Path
    said: list[tuple[str, str]] = field(default_factory=list)
    wal: list[bytes] = field(default_factory=list)

    def run(self, *args: str, code: int = 0, timeout: float = 120) -> str:
        env = {"SERVELAB_LEDGER": str(self.ledger)}
        done: subprocess.CompletedProcess[str] = run_cli(
            *args, cwd=self.root, env=env, timeout=timeout
        )
        self.said.append((" ".join(args), done.stdout + done.stderr))
        wal = self.ledger.with_name(self.ledger.name + "-wal")
        if wal.exists():
            self.wal.append(wal.read_bytes())
        assert done.returncode == code, f"{args}: {done.stdout}\n{done.stderr}"
        return done.stdout

    def written(self) -> Iterator[Path]:
        """The files to scan: under the state dir (less service logs), and the report dirs."""
        for path in sorted(self.root.rglob("*")):
            relative = path.relative_to(self.root).parts
            if not path.is_file() or _BACKUP.search(path.name):
                continue
            if relative[0] == "env" or relative[:2] == ("state", "logs"):
                continue
            yield path


def _env_text(service: str, extra: str = "") -> str:
    return "".join(f"{name}={value}\n" for name, value in PLANTED[service].items()) + extra


def _plant(root: Path) -> None:
    env = root / "env"
    for service in PLANTED:
        path = env / f"{service}.env"
        path.write_text(path.read_text() + _env_text(service))


def _break(path: Path) -> str:
    """Add a malformed line holding a secret; return the file's good text."""
    good = path.read_text()
    path.write_text(good + f"HF_TOKEN {MALFORMED}\n")
    return good


def _leaks(blob: bytes) -> list[str]:
    return [value for value in VALUES if value.encode() in blob]


def _check_no_leak(scan: Scan) -> None:
    found = [(what, _leaks(text.encode())) for what, text in scan.said]
    found += [(f"ledger -wal #{i}", _leaks(data)) for i, data in enumerate(scan.wal)]
    found += [(str(path), _leaks(path.read_bytes())) for path in scan.written()]
    leaked = [(where, values) for where, values in found if values]
    assert leaked == [], leaked
    assert scan.ledger.exists() and any(True for _ in scan.written())


def _up_restart_verify_knob(scan: Scan) -> None:
    env = scan.root / "env"
    good = _break(env / "decode.env")
    scan.run("up", code=2)  # failure: a malformed line (pre-flight, nothing started)
    (env / "decode.env").write_text(good)
    scan.run("up", "--json")
    scan.run("verify", "--e2e-max-tokens", "4")
    scan.run("knob", "get", "decode", K)
    scan.run("knob", "get", "decode", "PATH_HINT", code=2)  # failure: not a declared knob
    scan.run("knob", "set", "decode", "PATH_HINT=x", code=2)
    scan.run("knob", "set", "decode", f"{K}=256", "--reason", "try 256")
    scan.run("knob", "diff", "decode", K)
    for command in ("get", "diff"):
        said = scan.run("knob", command, "decode", SECRET_KNOB, "--json")
        assert "***" in said  # masked, the command still answers
        scan.run("knob", command, "decode", SECRET_KNOB)
    router = tomllib.loads((scan.root / "servelab.toml").read_text())["services"]["router"]["url"]
    written = str(scan.root / "init.toml")  # scanned: the spec init writes from the live stack
    scan.run("init", "--router", router, "-o", written, "--json")
    scan.run("init", "--router", router, "-o", written, code=2)  # failure: it exists
    # investigate reads the spec and the ledger (its loop runs soak, verify and case experiments,
    # scanned above and below); a failure: no such case
    scan.run("investigate", "--case", "999", "--yes", "--json", code=2)
    scan.run("knob", "set", "decode", f"{SECRET_KNOB}={KNOB_SECRET_NEW}", "--json")
    assert f"{SECRET_KNOB}={KNOB_SECRET_NEW}" in (env / "decode.env").read_text()  # written
    scan.run("verify", "decode", "--layer", "config", "--layer", "live", "--json", code=1)
    scan.run("verify", "decode", "--layer", "config", "--layer", "live", code=1)  # not live yet
    scan.run("restart", "decode", "--json", timeout=150)
    scan.run("knob", "set", "decode", f"{K}=512", "--reason", "back to 512")
    scan.run("restart", "decode", "--rollback", timeout=150)
    good = _break(env / "router.env")
    scan.run("restart", "decode", code=2)  # failure: pre-flight, nothing stopped
    (env / "router.env").write_text(good)


def _measure(scan: Scan) -> None:
    small = ("--requests", "3", "--input-len", "8", "--output-len", "4")
    headers = [arg for name, value in HEADERS.items() for arg in ("--header", f"{name}:{value}")]
    scan.run("bench", *small, *headers, "--export", str(scan.root / "bench-out"), timeout=120)
    scan.run("bench", *small, *headers, "--json", "--no-ledger", timeout=120)
    dead = f"http://127.0.0.1:{free_port()}"
    scan.run("bench", "--url", dead, *small, "--no-ledger", code=1)  # failure: nothing there
    scan.run(
        "ab", "--knob", f"decode:{K}=256,512", "--concurrency", "1", "--repeat", "1",
        "--requests", "3", "--warmup", "0", "--input-len", "8", "--output-len", "4",
        "--export", str(scan.root / "ab-out"), timeout=300,
    )  # fmt: skip
    scan.run("ab", "--knob", "decode:PATH_HINT=a,b", "--requests", "1", code=2)  # undeclared
    scan.run(
        "soak", "--sessions", "1", "--rounds", "2", "--max-tokens", "4", "--duration", "30",
        "--idle-timeout", "10", timeout=90,
    )  # fmt: skip


def _case(scan: Scan) -> None:
    opened = json.loads(scan.run("case", "open", "agentic sessions hang", "--json"))
    cid = str(opened["id"])
    scan.run("case", "suspect", cid, TARGET, "--reason", "latest change")
    scan.run("case", "revert", cid, TARGET, "--yes", timeout=150)
    scan.run("restore", cid, code=2)  # failure: the case is not resolved yet
    scan.run("case", "resolve", cid, "--root-cause", "client-side proxy", "--exonerate", TARGET)
    scan.run("restore", cid, timeout=150)
    scan.run("report", "--out", str(scan.root / "report-out"))
    scan.run("ledger", "export", "--json")
    scan.run("case", "show", "999", code=2)  # failure: no such case
    scan.run("case", "list", "--json")
    scan.run("case", "evidence", cid, "--note", "fresh connections always worked")
    scan.run("case", "test", "999", TARGET, code=2)  # failure paths only: each visit restarts
    scan.run("case", "bisect", "999", code=2)
    scan.run("ledger", "stats", "--json")
    scan.run("ledger", "prune", "--keep-records", "1")
    scan.run("ledger", "vacuum")
    scan.run("trace", "generate", str(scan.root / "trace.jsonl"), "--sessions", "2")
    scan.run("tune", "--knob", f"decode:{K}=256,512", "--plan", "--concurrency", "64")
    scan.run("tune", "--knob", "decode:PATH_HINT=a,b", "--plan", code=2)  # undeclared


def _simulator(scan: Scan) -> None:
    """The simulator's own failure paths (its running output is a service log, not scanned)."""
    bad = scan.root / "env" / "sim-bad.yaml"  # an input, the secret's home: not scanned
    bad.write_text(f'max-running-requests: 8\napi-key: "{SIM_SECRETS[1]}\nx: [\n')
    port = str(free_port())
    scan.run("sim", "decode", "--port", port, "--api-key", SIM_SECRETS[0], "--bogus", code=2)
    scan.run("sim", "prefill", "--port", port, "--config", str(bad), code=2)


def _commands() -> set[str]:
    """Every leaf command of servelab's click group (``knob get``, ``up``...)."""
    import click

    from servelab.cli import cli

    ctx = click.Context(cli)

    def walk(group: click.Group, prefix: str) -> Iterator[str]:
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if isinstance(command, click.Group):
                yield from walk(command, f"{prefix}{name} ")
            elif command is not None:
                yield f"{prefix}{name}"

    return set(walk(cli, ""))


def _check_every_command_ran(scan: Scan) -> None:
    ran = {what for what, _ in scan.said}
    missing = sorted(c for c in _commands() - set(NOT_RUN) if not any(r.startswith(c) for r in ran))
    assert missing == [], f"commands the planted-secret test does not run: {missing}"


@pytest.mark.timeout(900)
def test_no_planted_value_leaks_from_any_command(tmp_path: Path) -> None:
    root = tmp_path / "dep"
    write_pd_spec(root, time_scale=0.02, knob="512", name="leak-e2e", knobs=(K, SECRET_KNOB))
    _plant(root)
    decode_env = root / "env" / "decode.env"
    decode_env.write_text(decode_env.read_text() + f"{SECRET_KNOB}={KNOB_SECRET}\n")
    scan = Scan(root, root / "state" / "ledger.db")
    reader: sqlite3.Connection | None = None
    try:
        scan.run("status", code=1)  # failure: nothing up yet
        _up_restart_verify_knob(scan)
        _check_no_leak(scan)  # early too: a leak is told before a later step fails for it
        reader = sqlite3.connect(scan.ledger)  # keeps the -wal file from being checkpointed away
        reader.execute("SELECT count(*) FROM sqlite_master").fetchall()
        _measure(scan)
        _case(scan)
        _simulator(scan)
        scan.run("status")
        assert any(path.name.endswith(".json") for path in (root / "state" / "run").iterdir())
        scan.wal.append(scan.ledger.with_name("ledger.db-wal").read_bytes())
    finally:
        scan.run("down")
        if reader is not None:
            reader.close()
    assert live_procs_under(tmp_path) == []
    _check_no_leak(scan)
    _check_every_command_ran(scan)


def _printing_spec(root: Path, port: int) -> None:
    """One service whose start command prints its own environment, then fails (``exit 1``), and
    one that prints it and never gets ready; the planted values in their env files."""
    (root / "env").mkdir(parents=True)
    printer = "env; echo token $MODEL_CACHE_KEY; exit 1"
    server = f"{sys.executable} -m http.server {port} --bind 127.0.0.1"
    hanger = f"env; echo url $STORE_URL; exec {server}"
    (root / "servelab.toml").write_text(
        'name = "printer"\nstate_dir = "state"\n'
        f'[services.printer]\nrole = "generic"\nurl = "http://127.0.0.1:{free_port()}"\n'
        f"start = '{printer}'\nenv_file = \"env/printer.env\"\n"
        f'[services.hanger]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\n'
        f'start = \'{hanger}\'\nenv_file = "env/hanger.env"\nready_path = "/missing"\n'
        "ready_timeout_s = 2\n"
    )
    (root / "env" / "printer.env").write_text(_env_text("prefill"))
    (root / "env" / "hanger.env").write_text(_env_text("decode"))


def test_a_service_that_prints_its_environment_leaks_nothing(tmp_path: Path) -> None:
    """The log tail quoted when a service fails (its start command exits, or it is never ready)
    has every env value of the service redacted: on stderr, in ``--json``, in the ledger's
    ``deployments`` rows and in its export (issue: the tail carried ``$HF_TOKEN`` everywhere)."""
    root = tmp_path / "dep"
    _printing_spec(root, free_port())
    scan = Scan(root, root / "state" / "ledger.db")
    try:
        scan.run("up", "printer", code=1)
        scan.run("up", "printer", "--json", code=1)
        scan.run("up", "hanger", code=1)
        scan.run("ledger", "export")
        scan.run("ledger", "export", "--format", "jsonl")
    finally:
        scan.run("down")
    assert "token ***" in scan.said[0][1]  # the tail is still shown, its value replaced
    assert live_procs_under(tmp_path) == []
    _check_no_leak(scan)


#: What a start script traced with ``sh -x`` prints (issue 38, the nineteenth pass, H1): a
#: registry login's password, ``htpasswd``'s and one in prose, none of them in the env file (the
#: env-value rule cannot know them) and none shaped like a generated key (the class rules mask
#: them, not the rule for a generated-looking word standing alone).
TRACED = {"docker": "hunter2x9q", "htpasswd": "Zebra7731k", "prose": "tiger42lily"}


def test_a_start_script_traced_with_sh_x_leaks_no_password(tmp_path: Path) -> None:
    """A service whose start script runs under ``sh -x`` and fails: the tail ``up`` quotes (on
    stderr and twice in ``--json``) and the ledger stores holds ``+ : docker login -u bob -p ***
    registry.example``; ``up --json`` and ``ledger export`` carry no traced password."""
    root = tmp_path / "dep"
    (root / "env").mkdir(parents=True)
    script = root / "env" / "start.sh"  # the secrets' home, not scanned (as the env files)
    script.write_text(
        f": docker login -u bob -p {TRACED['docker']} registry.example\n"
        f": htpasswd -b /etc/nginx/htpasswd bob {TRACED['htpasswd']}\n"
        f"echo 'password for bob changed to {TRACED['prose']}'\n"
        "exit 1\n"
    )
    (root / "servelab.toml").write_text(
        'name = "traced"\nstate_dir = "state"\n'
        f'[services.traced]\nrole = "generic"\nurl = "http://127.0.0.1:{free_port()}"\n'
        f"start = 'sh -x {script}'\nenv_file = \"env/traced.env\"\n"
    )
    (root / "env" / "traced.env").write_text("LOG_LEVEL=info\n")
    scan = Scan(root, root / "state" / "ledger.db")
    try:
        scan.run("up", "traced", "--json", code=1)
        scan.run("up", "traced", code=1)
        scan.run("ledger", "export")
        scan.run("ledger", "export", "--format", "jsonl")
    finally:
        scan.run("down")
    assert live_procs_under(tmp_path) == []
    said = "\n".join(text for _, text in scan.said)
    assert "docker login -u bob -p *** registry.example" in said  # the tail is still shown
    blobs = [said.encode(), scan.ledger.read_bytes(), *scan.wal]
    blobs += [path.read_bytes() for path in scan.written()]
    leaked = [value for value in TRACED.values() if any(value.encode() in b for b in blobs)]
    assert leaked == [], leaked
