"""Issue 38, seventh pass, H10, through the real CLI: ``report --out DIR`` replaced a user's own
``perf-plan.md`` and wrote its HTML through a planted ``DIR/index.html -> victim`` link. Now a
file the pages would replace that servelab's last pages there did not write is kept (exit 2,
naming it, nothing written) unless ``--force``; a link is never written through, ``--force`` or
not; the pages' own directory is regenerated without ``--force``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from tests.support import run_cli
from tests.support.specs import write_pd_spec

NOTES = b"my own notes\n"
VICTIM = b"the victim's own bytes\n"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "l.db"
    with Ledger.open(path) as led:
        led.add(CaseRecord(id=0, at=NOW, title="agentic sessions hang", status="open"))
    return path


@pytest.fixture
def victim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A file outside the test's own directory (another tmp dir), its bytes to stay as they are."""
    path = tmp_path_factory.mktemp("elsewhere") / "victim.txt"
    path.write_bytes(VICTIM)
    yield path


def _report(ledger: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    done = run_cli("report", "--out", str(out), "--ledger", str(ledger), *extra)
    return done.returncode, done.stdout, done.stderr


def _one_line(err: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_own_notes_are_kept_without_force_then_replaced_with_it(
    ledger: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "perf-plan.md").write_bytes(NOTES)
    code, _, err = _report(ledger, out)
    assert code == 2, err
    assert str(out / "perf-plan.md") in err and "give --force to overwrite" in err
    _one_line(err)
    assert (out / "perf-plan.md").read_bytes() == NOTES
    assert sorted(p.name for p in out.iterdir()) == ["perf-plan.md"]  # nothing written

    code, _, err = _report(ledger, out, "--force")
    assert code == 0, err
    assert (out / "perf-plan.md").read_bytes() != NOTES
    assert (out / "index.html").is_file() and (out / "cases" / "case-1.md").is_file()


def test_a_planted_link_is_never_written_through(
    ledger: Path, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "index.html").symlink_to(victim)
    for extra in ((), ("--force",)):
        code, _, err = _report(ledger, out, *extra)
        assert code == 2, err
        assert str(out / "index.html") in err and "symbolic link" in err
        _one_line(err)
        assert victim.read_bytes() == VICTIM
        assert (out / "index.html").is_symlink()
        assert sorted(p.name for p in out.iterdir()) == ["index.html"]  # nothing written


def test_a_linked_folder_is_never_written_through(
    ledger: Path, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "cases").symlink_to(victim.parent, target_is_directory=True)
    code, _, err = _report(ledger, out, "--force")
    assert code == 2, err
    assert str(out / "cases") in err and "symbolic link" in err
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]
    assert victim.read_bytes() == VICTIM


def test_the_pages_own_directory_is_regenerated_without_force(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    code, _, err = _report(ledger, out)
    assert code == 0, err
    first = (out / "perf-plan.md").read_bytes()
    with Ledger.open(ledger) as led:  # new evidence: the pages change
        led.add(CaseRecord(id=0, at=NOW, title="answers changed", status="open"))
    code, stdout, err = _report(ledger, out, "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert "cases/case-2.md" in doc["written"]
    assert (out / "cases" / "case-2.md").is_file()
    assert (out / "perf-plan.md").read_bytes() != first or "perf-plan.md" in doc["unchanged"]

    # a page edited by hand since is the user's now: kept without --force
    (out / "cases" / "case-1.md").write_bytes(NOTES)
    code, _, err = _report(ledger, out)
    assert code == 2, err
    assert str(out / "cases" / "case-1.md") in err
    assert (out / "cases" / "case-1.md").read_bytes() == NOTES


def test_an_empty_file_destroys_nothing_and_needs_no_force(ledger: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    out.mkdir()
    (out / "perf-plan.md").write_bytes(b"")
    code, _, err = _report(ledger, out)
    assert code == 0, err
    assert (out / "perf-plan.md").stat().st_size > 0


@pytest.mark.parametrize("force", [False, True])
def test_investigate_refuses_its_out_dir_before_any_work(
    tmp_path: Path, victim: Path, force: bool
) -> None:
    """``investigate --out DIR`` writes the same pages (and its incident report) by the same
    rule, checked before the first soak: no deployment is up here, and none is reached."""
    spec = write_pd_spec(tmp_path, time_scale=0.05, name="refused")
    out = tmp_path / "rep"
    out.mkdir()
    (out / "perf-plan.md").write_bytes(NOTES)
    (out / "index.html").symlink_to(victim)
    extra = ("--force",) if force else ()
    done = run_cli("investigate", "-f", str(spec), "--ledger", str(tmp_path / "l.db"), "--yes",
                   "--out", str(out), *extra)  # fmt: skip
    assert done.returncode == 2, done.stderr + done.stdout
    assert str(out / "index.html") in done.stderr and "symbolic link" in done.stderr
    _one_line(done.stderr)
    assert victim.read_bytes() == VICTIM and (out / "perf-plan.md").read_bytes() == NOTES
    assert "investigate case" not in done.stderr + done.stdout  # no case opened, nothing reproduced
    (out / "index.html").unlink()
    done = run_cli("investigate", "-f", str(spec), "--ledger", str(tmp_path / "l.db"), "--yes",
                   "--out", str(out), *extra)  # fmt: skip
    if not force:
        assert done.returncode == 2, done.stderr + done.stdout
        assert f"{out / 'perf-plan.md'} exist(s)" in done.stderr and "--force" in done.stderr
        assert (out / "perf-plan.md").read_bytes() == NOTES
    else:  # past the check: the first step runs (and fails: no deployment is up)
        assert done.returncode == 1, done.stderr + done.stdout
        assert "investigate case 1: reproduce" in done.stderr + done.stdout


def test_ledger_export_csv_keeps_a_table_file_without_force(ledger: Path, tmp_path: Path) -> None:
    """``ledger export --format csv DIR`` checked only ``DIR/manifest.json``: a ``cases.csv`` of
    one's own there was replaced (and, on a failed export, removed)."""
    out = tmp_path / "folder"
    out.mkdir()
    (out / "cases.csv").write_bytes(NOTES)
    args = ("ledger", "export", "--format", "csv", str(out), "--ledger", str(ledger))
    refused = run_cli(*args)
    assert refused.returncode == 2, refused.stderr
    assert f"{out / 'cases.csv'} exists: give --force to overwrite it" in refused.stderr
    _one_line(refused.stderr)
    assert sorted(p.name for p in out.iterdir()) == ["cases.csv"]
    assert (out / "cases.csv").read_bytes() == NOTES
    done = run_cli(*args, "--force")
    assert done.returncode == 0, done.stderr
    assert b"agentic sessions hang" in (out / "cases.csv").read_bytes()


def test_ledger_export_csv_never_writes_a_table_through_a_link(
    ledger: Path, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "folder"
    out.mkdir()
    (out / "cases.csv").symlink_to(victim)
    done = run_cli("ledger", "export", "--format", "csv", str(out), "--ledger", str(ledger),
                   "--force")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(out / "cases.csv") in done.stderr and "symbolic link" in done.stderr
    _one_line(done.stderr)
    assert victim.read_bytes() == VICTIM
    assert sorted(p.name for p in out.iterdir()) == ["cases.csv"]  # refused before any table
