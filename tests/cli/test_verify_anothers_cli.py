"""A copy of a running spec with another state folder runs nothing of its own (issue 38,
nineteenth pass): ``verify`` there read the first's processes and printed ``verify PASS: 14/14``,
recording a passing verification in the copy's ledger, even after the copy's router setting
changed (item 2); ``status`` there marked the first's processes ``(NAME's)``, the copy's own
name, as if they were its own (item 3). Real processes: one simulated PD stack brought up from
``s1``, its spec copied to ``s3`` with ``state_dir = "state3"``."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support.generic import servelab_in
from tests.support.processes import live_procs_under
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml

pytestmark = pytest.mark.timeout(300)

#: What an A/B or a tune writes in the ledger as it starts: its journal, its knob changes.
JOURNALS = ("ab_sessions", "tune_runs", "knob_changes")


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """``s1`` up; ``s3`` the same spec with its own state folder, nothing launched from it."""
    root = tmp_path_factory.mktemp("copies")
    ports = PdPorts.free(proxy=False)
    s1, s3 = root / "s1", root / "s3"
    for folder, state in ((s1, "state"), (s3, "state3")):
        PdEnv().write(folder / "env")
        (folder / "servelab.toml").write_text(pd_spec_toml(ports, state_dir=state))
    try:
        code, _, err = servelab_in(s1, "up")
        assert code == 0, err
        yield s1, s3
    finally:
        servelab_in(s1, "down")
    assert live_procs_under(root) == []


def _verifications(root: Path) -> list[tuple[int, int]]:
    if not (root / "ledger.db").exists():
        return []
    with sqlite3.connect(root / "ledger.db") as db:
        return list(db.execute("SELECT id, ok FROM verifications"))


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_verify_of_a_copy_refuses_another_state_folders_processes(
    copies: tuple[Path, Path], as_json: bool
) -> None:
    _, s3 = copies
    code, out, err = servelab_in(s3, "verify", *(["--json"] if as_json else []))
    said = out + err
    assert code != 0, said
    assert "PASS" not in said, said
    assert "another state folder" in said and "test-pd" in said, said
    assert "prefill" in said and "decode" in said, said  # the processes named
    if as_json:
        doc = json.loads(out)
        assert doc["ok"] is False and doc["exit_code"] == code, doc
    assert all(not ok for _, ok in _verifications(s3)), _verifications(s3)


def test_verify_of_a_copy_refuses_after_its_router_setting_changed(
    copies: tuple[Path, Path],
) -> None:
    _, s3 = copies
    spec = s3 / "servelab.toml"
    text = spec.read_text()
    try:
        spec.write_text(text.replace('policy = "round_robin"', 'policy = "random"'))
        code, out, err = servelab_in(s3, "verify")
        assert code != 0 and "PASS" not in out + err, out + err
        assert all(not ok for _, ok in _verifications(s3))
    finally:
        spec.write_text(text)


def test_the_first_still_verifies_its_own(copies: tuple[Path, Path]) -> None:
    s1, _ = copies
    code, out, err = servelab_in(s1, "verify")
    assert code == 0 and "verify PASS" in out, out + err


def test_status_of_a_copy_names_the_other_state_folder(copies: tuple[Path, Path]) -> None:
    s1, s3 = copies
    code, out, err = servelab_in(s3, "status")
    assert "(test-pd's)" not in out, out  # it reads as this deployment's own
    assert "(another state" in out, out  # the cell wraps
    code, out, err = servelab_in(s3, "status", "--json")
    rows = {row["service"]: row for row in json.loads(out)}
    for worker in ("prefill", "decode"):
        others = rows[worker]["others"]
        assert others["whose"] == "state folder" and others["name"] == "test-pd", rows[worker]
    assert "others" not in rows["router"], rows["router"]  # the real router keeps no mark
    code, out, err = servelab_in(s1, "status")
    assert code == 0 and "another" not in out, out + err


def _journalled(root: Path) -> int:
    """How many A/B and tune journal rows the copy's ledger holds (0: none, or no ledger)."""
    if not (root / "ledger.db").exists():
        return 0
    with sqlite3.connect(root / "ledger.db") as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        return sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                   for t in JOURNALS if t in tables)  # fmt: skip


def _pids(root: Path) -> dict[str, object]:
    """Each service's pid as ``status --json`` run in ``root`` shows it."""
    return {
        row["service"]: row["pid"] for row in json.loads(servelab_in(root, "status", "--json")[1])
    }


@pytest.mark.parametrize("command", ["ab", "tune"])
def test_ab_and_tune_of_a_copy_refuse_up_front(copies: tuple[Path, Path], command: str) -> None:
    """The check ``verify`` refuses by, before anything is written, restarted or journalled
    (exit 2); the first copy's processes run on, untouched."""
    s1, s3 = copies
    env = {p.name: p.read_bytes() for p in (s3 / "env").iterdir()}
    pids = _pids(s1)
    knob = f"decode:{DEFAULT_KNOB}=256,512"
    code, out, err = servelab_in(s3, command, "--knob", knob, "--concurrency", "2", "--requests",
                                 "4", "--warmup", "0", "--output-len", "4", "--json")  # fmt: skip
    assert code == 2, out + err
    doc = json.loads(out)
    assert doc["error_type"] == "RunRefused" and doc["exit_code"] == 2, doc
    assert f"{command} refused" in doc["error"] and "another state folder" in doc["error"], doc
    assert "prefill" in doc["error"] and "decode" in doc["error"], doc
    assert {p.name: p.read_bytes() for p in (s3 / "env").iterdir()} == env
    assert _journalled(s3) == 0
    assert _pids(s1) == pids
