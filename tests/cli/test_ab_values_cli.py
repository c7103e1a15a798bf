"""``ab``'s values, ``--keep`` and ``--resume`` are checked before anything runs (issue 38, the
tenth pass): two spellings of one setting (``on,true``, ``256,0256``) are refused by ``ab`` and
``tune``; a ``--keep`` no A/B could leave live is refused before the journal starts; options given
with ``--resume`` are refused, not silently ignored; a hand-edited A/B journal is one line naming
the file and the field. Real processes; no deployment is up (a command that got as far as a
restart would start one, and the fixture would see it)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.result import ArmVisit
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import encode
from servelab.io.ledger.journal import AbJournal
from servelab.io.ledger.ledger import Ledger
from servelab.ops.ab.config import AbConfig
from tests.support import run_cli
from tests.support.processes import listening
from tests.support.specs import PdPorts, write_pd_spec

MRR = "--max-running-requests"
OVERLAP = "--disable-overlap-schedule"
LOAD = ("--requests", "4", "--concurrency", "1", "--warmup", "0")


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[tuple[Path, PdPorts]]:
    ports = PdPorts.free(proxy=False)
    path = write_pd_spec(tmp_path, ports=ports, knobs=(MRR, OVERLAP, DEFAULT_KNOB), knob=None,
                         decode_env="SGLANG_ARGS=--max-running-requests 32\n")  # fmt: skip
    text = path.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\n', 1
    )
    path.write_text(text)
    try:
        yield path, ports
    finally:  # were a refusal to fail and an A/B to start the deployment, it is stopped
        if any(listening(port) for port in ports.listened()):
            run_cli("down", "-f", str(path), timeout=120)


def _sessions(ledger: Path) -> int:
    if not ledger.exists():
        return 0
    with sqlite3.connect(ledger) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "ab_sessions" not in tables:
            return 0
        return int(conn.execute("SELECT COUNT(*) FROM ab_sessions").fetchone()[0])


@pytest.mark.parametrize(
    ("command", "knob", "message"),
    [
        ("ab", f"decode:{OVERLAP}=on,true", "'on' and 'true' are one setting (on)"),
        ("ab", f"decode:{MRR}=256,0256", "'256' and '0256' are one setting"),
        ("tune", f"decode:{MRR}=256,0256", "'256' and '0256' are one setting"),
        # the thirty-first pass: an env knob's nan,NaN planned two arms of one setting
        ("tune", f"decode:{DEFAULT_KNOB}=nan,512,NaN", "'nan' and 'NaN' are one setting"),
    ],
    ids=["ab-boolean", "ab-leading-zero", "tune-leading-zero", "tune-nan"],
)
def test_two_spellings_of_one_setting_are_refused(
    spec: tuple[Path, PdPorts], tmp_path: Path, command: str, knob: str, message: str
) -> None:
    """Issue 38, defect 16 again: ``ab`` ran two arms of one setting (``on,true``), and ``tune``
    took ``256,0256`` (the engines' ``int`` reads both as 256) as two arms."""
    path, ports = spec
    ledger = tmp_path / "ledger.db"
    done = run_cli(command, "-f", str(path), "--knob", knob, *LOAD, "--ledger", str(ledger))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert _sessions(ledger) == 0
    assert not any(listening(port) for port in ports.listened())


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ("Better", "--keep 'Better': did you mean better?"),
        ("*", "--keep '*' is not a value --max-running-requests takes"),
        ("0", "takes a number at least 1"),
        ("\uff16\uff14", "holds a digit that is not ASCII 0-9"),
    ],
    ids=["misspelt-word", "glob", "out-of-range", "full-width"],
)
def test_a_keep_no_ab_could_leave_live_is_refused_before_the_journal_starts(
    spec: tuple[Path, PdPorts], tmp_path: Path, keep: str, message: str
) -> None:
    """H2 (tenth pass): ``--keep VALUE`` was checked only after the whole A/B, leaving the
    candidate live and the journal ``running``. Now: exit 2, nothing run, no session."""
    path, ports = spec
    ledger = tmp_path / "ledger.db"
    done = run_cli("ab", "-f", str(path), "--knob", f"decode:{MRR}=16,32", "--keep", keep,
                   *LOAD, "--ledger", str(ledger))  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr, done.stderr
    assert _sessions(ledger) == 0
    assert not any(listening(port) for port in ports.listened())


@pytest.mark.parametrize(
    ("knob", "keep", "message"),
    [
        (f"{MRR}=16,32", "", "--keep '' is empty: name one arm's value as typed ('16' or '32')"),
        (f"{MRR}=16,32", " 16", "--keep ' 16' has white space around it"),
        (f"{MRR}=16,32", "99999999999999999999", "(64 bits: at most 9,223,372,036,854,775,807)"),
        (f"{MRR}=64,128", "256", "--keep '256' names neither arm of the A/B ('64' or '128')"),
        (f"{DEFAULT_KNOB}=256,512", "", "--keep '' is empty"),
        (f"{DEFAULT_KNOB}=256,512", " 512", "--keep ' 512' has white space around it"),
        (f"{DEFAULT_KNOB}=256,512", "512 ", "--keep '512 ' has white space around it"),
        (f"{DEFAULT_KNOB}=256,512", "384", "--keep '384' names neither arm"),
        (f"{OVERLAP}=off,on", "maybe", "--keep 'maybe' is not a value"),
    ],
    ids=["arg-empty", "arg-blank", "arg-past-int64", "arg-neither-arm", "env-empty", "env-blank",
         "env-blank-after", "env-neither-arm", "flag-not-a-value"],
)  # fmt: skip
def test_a_keep_that_names_no_arm_is_refused_before_anything_runs(
    spec: tuple[Path, PdPorts], tmp_path: Path, knob: str, keep: str, message: str
) -> None:
    """The thirteenth pass: ``--keep ''`` and ``--keep ' 512'`` were taken for an env knob (the
    arms' text is stripped: neither can name an arm), ``--keep 99999999999999999999`` for an
    integer argument, and any value that names neither arm (never measured) was kept."""
    path, ports = spec
    ledger = tmp_path / "ledger.db"
    done = run_cli("ab", "-f", str(path), "--knob", f"decode:{knob}", "--keep", keep, *LOAD,
                   "--ledger", str(ledger))  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert _sessions(ledger) == 0
    assert not any(listening(port) for port in ports.listened())


@pytest.mark.parametrize(
    ("knob", "keep"),
    [(f"{MRR}=16,32", "token=abcdefgh"), (f"{DEFAULT_KNOB}=256,512", "password:hunter2x")],
    ids=["arg", "env"],
)
def test_a_masked_keep_leaves_the_refusal_whole(
    spec: tuple[Path, PdPorts], tmp_path: Path, knob: str, keep: str
) -> None:
    """A ``--keep`` the redaction policy masks (``token=...``) was quoted in the refusal, and
    its mask ran to the end of the line: ``--keep 'token=***``, the rest of the sentence gone.
    Now the whole value is shown as ``***`` and the sentence stays whole, secret-free."""
    path, _ = spec
    done = run_cli("ab", "-f", str(path), "--knob", f"decode:{knob}", "--keep", keep, *LOAD,
                   "--ledger", str(tmp_path / "ledger.db"), "--json")  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    error = json.loads(done.stdout)["error"]
    assert error.startswith("--keep *** (masked: it looks like a secret) "), error
    assert error.endswith(("takes", "or better, baseline or candidate")), error
    secret = keep.split("=")[-1].split(":")[-1]  # abcdefgh, hunter2x
    assert secret not in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["ab", "tune"])
def test_options_given_with_resume_are_refused_naming_them(
    spec: tuple[Path, PdPorts], tmp_path: Path, command: str
) -> None:
    """``ab --resume 1 --requests 99`` ran the journalled A/B with its own 256 requests, saying
    nothing of the 99: refused, naming each option, before the ledger is read."""
    path, _ = spec
    ledger = tmp_path / "ledger.db"
    done = run_cli(command, "-f", str(path), "--resume", "1", "--requests", "99", "--order-seed",
                   "3", "--ledger", str(ledger))  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--requests, --order-seed would be ignored" in done.stderr, done.stderr
    assert not ledger.exists()


def _journal(ledger_path: Path) -> int:
    cfg = AbConfig("decode", MRR, "16", "32", BenchConfig(url="", concurrencies=(1,), requests=4))
    with Ledger.open(ledger_path) as ledger:
        journal = AbJournal(ledger)
        sid = journal.start(service="decode", knob=MRR, config=encode(cfg), original="32")
        journal.add_visit(sid, 0, ArmVisit("16", 0, None, "16", {1: 100.0}, 0))
    return sid


@pytest.mark.parametrize(
    ("table", "edit", "field"),
    [
        ("ab_visits", lambda doc: {**doc, "throughput": "fast"}, "throughput"),
        ("ab_visits", lambda doc: {**doc, "round": "first"}, "round"),
        ("ab_sessions", lambda doc: {**doc, "repeat": "three"}, "repeat"),
    ],
    ids=["visit-throughput", "visit-round", "config-repeat"],
)
def test_a_hand_edited_journal_is_one_line_naming_the_file_and_the_field(
    spec: tuple[Path, PdPorts], tmp_path: Path, table: str, edit: object, field: str
) -> None:
    """A hand-edited visit printed pydantic's validation error over many lines (exit 1)."""
    path, ports = spec
    ledger = tmp_path / "ledger.db"
    sid = _journal(ledger)
    column = "visit" if table == "ab_visits" else "config"
    key = "session_id" if table == "ab_visits" else "id"
    with sqlite3.connect(ledger) as conn:
        text = conn.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (sid,)).fetchone()[0]
        changed = edit(json.loads(text))  # type: ignore[operator]
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?",
                     (json.dumps(changed), sid))  # fmt: skip
    done = run_cli("ab", "-f", str(path), "--resume", str(sid), "--ledger", str(ledger))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(ledger) in lines[0] and field in lines[0] and "Traceback" not in done.stderr
    assert not any(listening(port) for port in ports.listened())
