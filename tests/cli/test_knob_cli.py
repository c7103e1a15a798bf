"""``servelab knob get|set|diff`` as a real process: backups, records, restart notice, exits."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from servelab.core.case.record import CaseRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from tests.support import REPO, free_port
from tests.support import run_cli as _run_cli
from tests.support.specs import SECRET, write_decode_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI, its ledger pinned to the work dir's (whatever the caller's environment)."""
    return _run_cli(*args, cwd=cwd, env={"SERVELAB_LEDGER": str(cwd / "state" / "ledger.db")})


def _workdir(tmp_path: Path) -> Path:
    env_text = f"# d\n{KNOB}=512\nSECRET_TOKEN={SECRET}\n"
    write_decode_spec(tmp_path, free_port(), knobs=(KNOB,), env_text=env_text)
    return tmp_path


def test_set_get_diff_with_backup_case_and_reason(tmp_path: Path) -> None:
    root = _workdir(tmp_path)
    with Ledger.open(root / "state" / "ledger.db") as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="agentic sessions hang", status="open"))

    got = run_cli("knob", "get", "decode", KNOB, cwd=root)
    assert got.returncode == 0 and f"{KNOB}=512" in got.stdout

    done = run_cli(
        "knob", "set", "decode", f"{KNOB}=256", "--reason", "latest change before the hang",
        "--case", str(case_id), "--json", cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    change = json.loads(done.stdout)
    assert (change["old"], change["new"], change["changed"]) == ("512", "256", True)
    assert Path(change["backup_path"]).read_text().count(f"{KNOB}=512") == 1
    assert not change["running"]  # nothing listens on the port: the value is used at next start

    text = run_cli("knob", "set", "decode", f"{KNOB}=128", cwd=root)
    assert text.returncode == 0 and "256 -> 128" in text.stdout and "backup:" in text.stdout
    assert "not running" in text.stdout

    diff = run_cli("knob", "diff", "decode", KNOB, cwd=root)
    assert diff.returncode == 0
    assert "128" in diff.stdout and "256" in diff.stdout and "(not running)" in diff.stdout
    diff_json = json.loads(run_cli("knob", "diff", "decode", KNOB, "--json", cwd=root).stdout)
    assert (diff_json["file"], diff_json["backup"], diff_json["live"]) == ("128", "256", None)

    with Ledger.open(root / "state" / "ledger.db") as ledger:
        rows = ledger.list(KnobChangeRecord, service="decode", name=KNOB)
    assert [(r.old, r.new) for r in rows] == [("512", "256"), ("256", "128")]
    assert rows[0].case_id == case_id and rows[0].reason == "latest change before the hang"
    everything = got.stdout + done.stdout + text.stdout + diff.stdout + json.dumps(diff_json)
    assert SECRET not in everything
    for db in (root / "state").glob("ledger.db*"):
        assert SECRET.encode() not in db.read_bytes()


def test_bad_input_exits_2_without_revealing_values(tmp_path: Path) -> None:
    root = _workdir(tmp_path)
    secret = run_cli("knob", "get", "decode", "SECRET_TOKEN", cwd=root)
    assert secret.returncode == 2 and "not a declared knob" in secret.stderr
    assert SECRET not in secret.stdout + secret.stderr
    assert run_cli("knob", "set", "decode", KNOB, cwd=root).returncode == 2  # no =VALUE
    assert run_cli("knob", "get", "nope", KNOB, cwd=root).returncode == 2
    unknown_case = run_cli("knob", "set", "decode", f"{KNOB}=1", "--case", "999", cwd=root)
    assert unknown_case.returncode == 2 and "unknown case" in unknown_case.stderr
    assert (root / "env" / "decode.env").read_text().count(f"{KNOB}=512") == 1
    unset = run_cli("knob", "set", "decode", KNOB, "--unset", "--json", cwd=root)
    assert unset.returncode == 0 and json.loads(unset.stdout)["new"] is None


def test_the_quick_start_example_gets_no_file_beside_its_env_files(tmp_path: Path) -> None:
    """`knob set`/`diff` on examples/local-sim.toml (a copy): backups go to its state dir."""
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env_dir = tmp_path / "examples" / "env"
    before = {p.name: p.read_bytes() for p in env_dir.iterdir()}
    spec = ("-f", str(tmp_path / "examples" / "local-sim.toml"))
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    for value in ("256", "512"):
        done = _run_cli("knob", "set", *spec, "decode", f"{KNOB}={value}", "--json", env=env)
        assert done.returncode == 0, done.stderr
        backup = Path(json.loads(done.stdout)["backup_path"])
        state = tmp_path / ".servelab" / "local-sim"
        assert backup.parent.parent.resolve() == state / "backups" / "decode"
        diff = _run_cli("knob", "diff", *spec, "decode", KNOB, "--json", env=env)
        assert diff.returncode == 0 and json.loads(diff.stdout)["backup_path"] == str(backup)
    assert {p.name: p.read_bytes() for p in env_dir.iterdir()} == before  # set back: identical
    assert sorted(p.name for p in (tmp_path / "examples").iterdir()) == sorted(
        p.name for p in (REPO / "examples").iterdir()
    )


def test_an_argument_knob_comes_after_double_dash(tmp_path: Path) -> None:
    """``knob set decode -- --max-running-requests=128``: the args_env variable is edited, and
    the output says where; a name that is no knob at all is bad input (exit 2)."""
    knobs = (KNOB, "--max-running-requests", "--disable-overlap-schedule")
    env_text = "SGLANG_ARGS=--max-running-requests 64\n"
    spec = write_decode_spec(tmp_path, free_port(), knobs=knobs, env_text=env_text)
    spec.write_text(spec.read_text() + 'args_env = "SGLANG_ARGS"\n')
    done = run_cli("knob", "set", "decode", "--reason", "a/b", "--",
                   "--max-running-requests=128", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "64 -> 128 in the args_env variable of" in done.stdout
    got = run_cli("knob", "get", "decode", "--json", "--", "--max-running-requests", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["value"] == "128"
    assert json.loads(got.stdout)["place"] == "args_env"
    flag = run_cli("knob", "set", "decode", "--", "--disable-overlap-schedule=on", cwd=tmp_path)
    assert flag.returncode == 0, flag.stderr
    env = (tmp_path / "env" / "decode.env").read_text()
    assert env == 'SGLANG_ARGS="--max-running-requests 128 --disable-overlap-schedule"\n'
    bad = run_cli("knob", "set", "decode", "--", "--disable-overlap-schedule=64", cwd=tmp_path)
    assert bad.returncode == 2 and "on or off" in bad.stderr
    undeclared = run_cli("knob", "get", "decode", "--", "--schedule-policy", cwd=tmp_path)
    assert undeclared.returncode == 2 and "not a declared knob" in undeclared.stderr


def test_knob_get_shows_and_encodes_a_values_edge_blanks_exactly(tmp_path: Path) -> None:
    """The sixth hostile pass: ``knob set`` stored ``"x "`` and ``knob get`` showed ``x`` (the
    env-file reader dropped a double-quoted value's trailing blank): the page quotes a value with
    edge blanks, ``--json`` carries it exactly."""
    root = _workdir(tmp_path)
    for typed, page in (("x ", f'{KNOB}="x "  ('), (" y ", f'{KNOB}=" y "  (')):
        done = run_cli("knob", "set", "decode", f"{KNOB}={typed}", cwd=root)
        assert done.returncode == 0, done.stderr
        got = run_cli("knob", "get", "decode", KNOB, cwd=root)
        assert got.returncode == 0 and page in got.stdout, got.stdout
        doc = json.loads(run_cli("knob", "get", "decode", KNOB, "--json", cwd=root).stdout)
        assert doc["value"] == typed
    # a tab, a control character, is refused since the eighth pass (invisible in a terminal)
    tab = run_cli("knob", "set", "decode", f"{KNOB}= y\t", cwd=root)
    assert tab.returncode == 2 and "U+0009" in tab.stderr, tab.stderr
    plain = run_cli("knob", "set", "decode", f"{KNOB}=512", cwd=root)
    assert plain.returncode == 0
    assert f"{KNOB}=512  (" in run_cli("knob", "get", "decode", KNOB, cwd=root).stdout


def test_set_on_a_crlf_env_file_keeps_its_line_ends(tmp_path: Path) -> None:
    """Issue 38, defect D: ``knob set`` wrote its line of a CRLF env file with LF alone (the
    other lines kept CRLF); ``knob get`` reads the value without the CR."""
    env_text = f"# d\r\n{KNOB}=256\r\nOTHER=a\r\n"
    write_decode_spec(tmp_path, free_port(), knobs=(KNOB,), env_text=env_text)
    env = tmp_path / "env" / "decode.env"
    assert env.read_bytes() == env_text.encode()  # CRLF, as written
    got = run_cli("knob", "get", "decode", KNOB, "--json", cwd=tmp_path)
    assert got.returncode == 0 and json.loads(got.stdout)["value"] == "256", got.stderr
    done = run_cli("knob", "set", "decode", f"{KNOB}=512", "--reason", "crlf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert env.read_bytes() == f"# d\r\n{KNOB}=512\r\nOTHER=a\r\n".encode()
    got = run_cli("knob", "get", "decode", KNOB, "--json", cwd=tmp_path)
    assert json.loads(got.stdout)["value"] == "512"
