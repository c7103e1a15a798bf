"""``servelab investigate``'s input and the ledger it reads (issue 38, fourth pass: M2, M3, M4),
through the CLI on one real stack (simulated prefill and decode behind the real sglang-router),
each scenario with its own ledger:

- M3: a bad ``--since`` (a number past SQLite's, a word) exits 2 and opens no case; a symptom that
  does not reproduce (``--symptom slow`` with no baseline) resolves the case it opened with "did
  not reproduce" as its root cause, and leaves a case given by ``--case`` open.
- M2: ``cd tr && servelab bench -f ../spec --trace crlf.jsonl`` records the trace by its absolute
  path, so ``investigate --symptom slow`` from the parent directory replays it; a row recorded
  before (its path relative) says the trace recorded as ``crlf.jsonl`` (relative to where bench
  ran) is not found here, exit 1, and opens no case.
- M4: a hand-edited ``bench_runs`` row (``config = '[1,2,3]'``) is one line naming the table and
  the row, exit 2, no validator dump, and no case opened.
- ``bench --trace`` (no stack needed: the trace is read before any load): a ``NaN`` timestamp names
  the file, the line and the NaN; an empty trace names the file and ``--trace``, not a
  ``--trace-window`` that was never given.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseRecord
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

HUGE = "verify:99999999999999999999999"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("input")
    spec = write_pd_spec(root, time_scale=0.02, name="input",
                         worker_env="SERVELAB_SIM_WARMUP_S=0\n")  # fmt: skip
    with deployed(load_spec(spec)) as loaded:
        yield loaded


def _cases(ledger: Path) -> list[CaseRecord]:
    if not ledger.exists():
        return []
    with Ledger.open(ledger) as opened:
        return opened.list(CaseRecord)


def _slow(stack: LoadedSpec, ledger: Path, *more: str, cwd: Path | None = None) -> tuple[
    int, str, str]:  # fmt: skip
    done = run_cli("investigate", "--symptom", "slow", "--yes", "-f", str(stack.source),
                   "--ledger", str(ledger), *more, cwd=cwd, timeout=300)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "pydantic" not in stderr and "{" not in lines[0]
    return lines[0]


@pytest.mark.timeout(300)
def test_bad_since_exits_2_and_opens_no_case(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.db"
    for since, said in ((HUGE, "no verification 99999999999999999999999"),
                        ("verify:abc", "--since takes verify:ID"),
                        ("verify:٣", "--since takes verify:ID")):  # fmt: skip
        code, out, err = _slow(stack, ledger, "--since", since)
        assert code == 2, out + err
        assert said in _one_error_line(err)
        assert _cases(ledger) == []  # bad input: refused before any case was opened


@pytest.mark.timeout(300)
def test_not_reproduced_resolves_the_case_it_opened_and_keeps_a_given_case_open(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.db"
    code, out, err = _slow(stack, ledger)
    assert code == 1 and "no baseline recorded" in out, out + err
    (case,) = _cases(ledger)
    assert case.status == "resolved" and case.title == "investigation"
    assert case.root_cause is not None and case.root_cause.startswith("did not reproduce (slower)")
    with Ledger.open(ledger) as opened:
        given = cases.open_case(opened, "throughput fell")
    code, out, err = _slow(stack, ledger, "--case", str(given))
    assert code == 1, out + err
    statuses = {c.id: c.status for c in _cases(ledger)}
    assert statuses == {case.id: "resolved", given: "open"}  # the operator's case: theirs


def _trace(folder: Path) -> Path:
    folder.mkdir()
    lines = [{"timestamp": 40 * i, "input_length": 64, "output_length": 8, "hash_ids": [i]}
             for i in range(12)]  # fmt: skip
    path = folder / "crlf.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\r\n" for line in lines))
    return path


@pytest.mark.timeout(600)
def test_a_trace_bench_is_replayed_from_another_directory_and_an_old_row_says_why_not(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    trace = _trace(tmp_path / "tr")
    ledger = tmp_path / "ledger.db"
    done = run_cli("bench", "-f", str(stack.source), "--trace", "crlf.jsonl", "--repeat", "2",
                   "--ledger", "../ledger.db", cwd=tmp_path / "tr", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    db = sqlite3.connect(ledger)
    sql = "SELECT json_extract(config, '$.trace.path') FROM bench_runs"
    paths = {r[0] for r in db.execute(sql)}
    assert paths == {str(trace.resolve())}  # recorded resolved, not as typed
    code, out, err = _slow(stack, ledger, cwd=tmp_path)
    assert code in (0, 1) and "cannot read the trace" not in err, out + err
    assert "against baseline bench" in out, out + err  # reproduced: the trace replayed from here
    opened = len(_cases(ledger))
    # a row recorded before: its path as typed, relative to where bench ran
    db.execute("UPDATE bench_runs SET config = json_set(config, '$.trace.path', 'crlf.jsonl')")
    db.commit()
    code, out, err = _slow(stack, ledger, cwd=tmp_path)
    assert code == 1, out + err
    line = _one_error_line(err)
    assert "the trace recorded as `crlf.jsonl` (relative to where bench ran) is not found here" \
        in line and "servelab bench --trace" in line  # fmt: skip
    assert len(_cases(ledger)) == opened  # no case opened for it
    # the same row from the directory bench ran in: read there, as it was recorded
    code, out, err = _slow(stack, Path("../ledger.db"), cwd=tmp_path / "tr")
    assert "cannot read the trace" not in err and "not found here" not in err, out + err
    # M4: a hand-edited row is one line naming the table and the row, exit 2, no case opened
    (run_id,) = next(iter(db.execute("SELECT max(id) FROM bench_runs")))
    db.execute("UPDATE bench_runs SET config = '[1,2,3]' WHERE id = ?", (run_id,))
    db.commit()
    before = len(_cases(ledger))
    code, out, err = _slow(stack, ledger, cwd=tmp_path)
    assert code == 2, out + err
    said = f"ledger: bench_runs row {run_id} does not read as a bench run (config: not an object)"
    assert _one_error_line(err) == f"error: {said}; fix or remove it"
    assert len(_cases(ledger)) == before


def test_a_bad_or_empty_trace_names_the_file_and_the_option_given(tmp_path: Path) -> None:
    nan, empty = tmp_path / "nan.jsonl", tmp_path / "empty.jsonl"
    nan.write_text('{"timestamp": NaN, "input_length": 8, "output_length": 2}\n')
    empty.write_text("\n\n")
    common = ("--url", "http://127.0.0.1:9/", "--ledger", str(tmp_path / "ledger.db"))
    done = run_cli("bench", "--trace", str(nan), *common)
    assert done.returncode == 2, done.stderr
    assert f"{nan} line 1: not a JSON object (NaN is not a JSON number)" in done.stderr
    done = run_cli("bench", "--trace", str(empty), *common)
    assert done.returncode == 2, done.stderr
    assert f"{empty} holds no request" in done.stderr and "--trace-window" not in done.stderr
    window = run_cli("bench", "--trace", str(empty), "--trace-window", "5:10", *common)
    assert window.returncode == 2 and "--trace-window" in window.stderr, window.stderr


@pytest.mark.timeout(300)
def test_an_ab_over_a_trace_records_its_absolute_path(stack: LoadedSpec, tmp_path: Path) -> None:
    """``ab --trace`` from another directory: its journal and its row hold the resolved path, so
    ``ab --resume`` from anywhere replays the same file."""
    trace = _trace(tmp_path / "tr")
    done = run_cli("ab", "-f", str(stack.source), "--knob", f"decode:{DEFAULT_KNOB}=256,512",
                   "--trace", "crlf.jsonl", "--repeat", "1", "--ledger", "../ab.db",
                   cwd=tmp_path / "tr", timeout=240)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr + done.stdout
    db = sqlite3.connect(tmp_path / "ab.db")
    path = "json_extract(config, '$.bench.trace.path')"
    recorded = {r[0] for t in ("ab_runs", "ab_sessions")
                for r in db.execute(f"SELECT {path} FROM {t}")}  # fmt: skip
    assert recorded == {str(trace.resolve())}
