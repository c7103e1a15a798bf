"""A bench run's page from the ledger shows the requests its end cut (``--deadline``, a stop) as
cut, never under "## Failures" (the thirty-first hostile pass's medium), whatever the run's age:
its stored ``failures`` have always counted them. A real ledger file, the real CLI."""

from __future__ import annotations

from pathlib import Path

from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli


def _page(tmp_path: Path, failures: dict[str, int]) -> str:
    ledger = tmp_path / "ledger.db"
    with Ledger.open(ledger) as opened:
        opened.record_bench_run(
            label="r", config={"concurrency": 8}, summary={"failures": failures}, records=[]
        )
    out = tmp_path / "docs"
    done = run_cli("report", "--ledger", str(ledger), "--out", str(out))
    assert done.returncode == 0, done.stderr
    (page,) = (out / "runs").glob("run-*.md")
    return page.read_text()


def test_a_run_cut_by_its_deadline_has_no_failures_section(tmp_path: Path) -> None:
    text = _page(tmp_path, {"run deadline": 5})
    assert "## Failures" not in text, text
    assert "## Cut" in text and "- run deadline: 5" in text, text
    assert "not counted as failures" in text, text


def test_a_stopped_run_with_real_failures_shows_both_apart(tmp_path: Path) -> None:
    text = _page(tmp_path, {"interrupted": 8, "http 500": 2})
    failures = text.split("## Failures", 1)[1].split("##", 1)[0]
    assert "- http 500: 2" in failures and "interrupted" not in failures, text
    cut = text.split("## Cut", 1)[1]
    assert "- interrupted: 8" in cut and "http 500" not in cut, text


def test_a_run_without_cut_requests_has_no_cut_section(tmp_path: Path) -> None:
    text = _page(tmp_path, {"http 500": 2})
    assert "- http 500: 2" in text and "## Cut" not in text, text
