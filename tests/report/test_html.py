"""The HTML index rendered by a real headless Chromium (Debian's chromium, scripts/sysdeps.sh)."""

from __future__ import annotations

import re
from pathlib import Path

from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.report import html
from servelab.report.html import CaseRow, KnobRow, render_index
from tests.support.browser import dump_dom
from tests.support.sysdeps import chromium

K = "SGLANG_SM120_MMA_TARGET_CTAS"


def _index() -> str:
    knobs = [
        KnobRow("decode", K, "512", "512", "C64: better", [],
                [("A/B #1: decode", [["concurrency", "verdict"], ["C64", "better"]])]),
    ]  # fmt: skip
    cases = [CaseRow(3, "Agentic <sessions> stall", "resolved", "restored and verified",
                     "client-side proxy", "cases/case-3.md", ["decode K 256 → 512"])]  # fmt: skip
    return render_index(knobs, cases, {}, "perf-plan.md")


def test_public_api() -> None:
    assert set(html.__all__) == {"CaseRow", "KnobRow", "render_index"}


def test_index_is_self_contained_and_escaped() -> None:
    page = _index()
    assert "Agentic &lt;sessions&gt; stall" in page
    assert not re.search(r"<(script|link)\b", page)
    assert not re.search(r'src="https?:', page)


def _ledger_index(tmp_path: Path) -> Path:
    """The index ``build_docs`` makes from a real ledger file holding a resolved case and an A/B."""
    from servelab.io.ledger.ledger import Ledger
    from servelab.ops.case import case as cases
    from servelab.report.docs import build_docs
    from tests.support.history import incident

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        cid = incident(ledger)
        cases.resolve_case(ledger, cid, "client-side proxy", exonerate=[f"knob:decode/{K}"])
        files = build_docs(decode(LedgerExport, ledger.export()))
    index = tmp_path / "index.html"
    index.write_bytes(files["index.html"])
    return index


def test_headless_chromium_renders_case_title_knob_and_table(tmp_path: Path) -> None:
    chromium()  # skips for a developer without it, fails in CI or as root
    dom = dump_dom(_ledger_index(tmp_path), tmp_path / "profile")
    # the parser's own additions prove a browser built this DOM, not our string echoed back
    assert "<tbody>" in dom
    cases_table = re.search(r'<table id="cases">.*?</table>', dom, re.S)
    assert cases_table is not None
    assert "Agentic sessions stall" in cases_table.group(0)
    assert "restore pending" in cases_table.group(0)
    knobs_table = re.search(r'<table id="knobs">.*?</table>', dom, re.S)
    assert knobs_table is not None and K in knobs_table.group(0)
    assert re.search(r'<table class="ab">.*?<td>C64</td><td>256 → 512</td>', dom, re.S)
    assert re.search(r'<img [^>]*src="data:image/png;base64,', dom)
