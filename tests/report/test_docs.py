"""Docs from the ledger alone: wording, perf plan, case pages, regeneration after a verdict."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.ab.result import AbResult
from servelab.core.case.revert import ConcurrencyCost, ConvictionTest, RevertCost
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.core.verify.record import read_check
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from servelab.report import docs, perfplan
from servelab.report.docs import (
    build_docs,
    describe_conviction,
    describe_cost,
    describe_point,
)
from servelab.report.text import pct
from tests.support.history import K, incident


def test_public_api() -> None:
    for module in (docs, perfplan):
        for name in module.__all__:
            assert hasattr(module, name), name


def test_percent_uses_a_real_minus() -> None:
    assert pct(-0.113) == "−11.3%" and pct(0.057) == "+5.7%"


@pytest.mark.parametrize(
    ("point", "text"),
    [
        (ConcurrencyCost(64, -0.113, (-0.138, -0.091), "worse"),
         "−11.3% at C64 (95% CI −13.8% … −9.1%)"),
        (ConcurrencyCost(80, -0.012, (-0.03, 0.01), "no significant difference"), "n.s. at C80"),
        (ConcurrencyCost(96, None, None, "inconclusive"), "inconclusive at C96"),
    ],
)  # fmt: skip
def test_describe_point(point: ConcurrencyCost, text: str) -> None:
    assert describe_point(point) == text


def test_describe_cost_puts_the_biggest_loss_first_and_says_when_unmeasured() -> None:
    cost = RevertCost("decode", K, "512", "256", 7, (
        ConcurrencyCost(64, -0.113, None, "worse"),
        ConcurrencyCost(80, -0.01, None, "no significant difference"),
        ConcurrencyCost(96, -0.054, None, "worse"),
    ))  # fmt: skip
    assert describe_cost(cost) == "−11.3% at C64, −5.4% at C96, n.s. at C80 (A/B #7)"
    unmeasured = describe_cost(RevertCost("decode", K, "512", "256"))
    assert unmeasured.startswith("not measured") and "512 with 256" in unmeasured


def test_describe_conviction() -> None:
    text = describe_conviction(ConvictionTest(f"knob:decode/{K}", "512", "256", (3,), ()))
    assert f"fails with {K}=512 and passes with {K}=256" in text
    assert "failing with it #3, passing without it none (not met)" in text


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


def test_build_docs_holds_every_file_and_the_facts(ledger: Ledger) -> None:
    cid = incident(ledger)
    cases.resolve_case(ledger, cid, "client-side proxy", exonerate=[f"knob:decode/{K}"])
    files = build_docs(decode(LedgerExport, ledger.export()))
    assert set(files) == {
        "perf-plan.md", f"cases/case-{cid}.md", "plots/ab-1.png", "index.html",
        # every markdown page has an HTML twin a browser shows; each A/B has its own page
        "perf-plan.html", f"cases/case-{cid}.html", "ab/ab-1.md", "ab/ab-1.html",
    }  # fmt: skip
    plan = files["perf-plan.md"].decode()
    assert f"## decode `{K}`" in plan
    assert "current live value: **256** (verification #1" in plan
    assert "| C64 | 256 → 512 | 1.128 (+12.8%) | 1.100 … 1.160 | better |" in plan
    assert "- arm 256: non_monotonic at C96" in plan
    assert f"case {cid} (Agentic sessions stall): **exonerated**" in plan
    page = files[f"cases/case-{cid}.md"].decode()
    assert page.startswith(f"# Case {cid}: Agentic sessions stall")
    assert "- restore: **restore pending**" in page
    assert f"decode {K} 256 → 512: reverted under case {cid}" in page
    assert "cost of the revert: −11.3% at C64" in page
    index = files["index.html"].decode()
    assert "Agentic sessions stall" in index and K in index and "data:image/png;base64," in index


def test_a_changed_verdict_changes_every_file_that_depends_on_it(ledger: Ledger) -> None:
    cid = incident(ledger)
    cases.resolve_case(ledger, cid, "the knob", convict=[f"knob:decode/{K}"], override="hand")
    before = build_docs(decode(LedgerExport, ledger.export()))
    assert "Restore plan" in before[f"cases/case-{cid}.md"].decode()
    assert "nothing to restore" in before[f"cases/case-{cid}.md"].decode()
    page = before[f"cases/case-{cid}.md"].decode()  # the override event, read back as its type
    assert f"override: hand — against the evidence: knob:decode/{K} convicted" in page
    # deterministic, plots included
    assert build_docs(decode(LedgerExport, ledger.export())) == before
    cases.resolve_case(ledger, cid, "client-side proxy", exonerate=[f"knob:decode/{K}"])
    after = build_docs(decode(LedgerExport, ledger.export()))
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {
        "perf-plan.md", f"cases/case-{cid}.md", "index.html",
        "perf-plan.html", f"cases/case-{cid}.html",
    }  # fmt: skip
    assert "**exonerated**" in after["perf-plan.md"].decode()
    assert "restore pending" in after["index.html"].decode()


def test_empty_ledger_still_makes_an_index(ledger: Ledger) -> None:
    files = build_docs(decode(LedgerExport, ledger.export()))
    assert set(files) == {"perf-plan.md", "perf-plan.html", "index.html"}
    assert "No case recorded" in files["index.html"].decode()


def test_comparison_rows_show_a_dash_for_nan_and_the_confidence_level() -> None:
    nan = float("nan")
    inconclusive = Comparison(64, nan, (nan, nan), Verdict.INCONCLUSIVE, "a", "b")
    ab = AbResult("decode", "K", "a", "b", comparisons=(inconclusive,))
    assert perfplan.comparison_rows(ab) == [["C64", "a → b", "—", "—", "inconclusive"]]
    point = ConcurrencyCost(64, -0.1, (-0.2, -0.05), "worse", confidence=0.9)
    assert describe_point(point) == "−10.0% at C64 (90% CI −20.0% … −5.0%)"


def test_markdown_pages_carry_no_raw_html_from_user_text(ledger: Ledger) -> None:
    """Defect 26 (issue 38): a ``<script>`` in a case title or knob value was written raw into
    the markdown pages (the HTML was escaped)."""
    evil = "<script>alert(1)</script>"
    ledger.add(KnobChangeRecord(id=0, at=NOW, service="decode", name=K, old="256",
                                new=f"5`{evil}`x{evil}", reason=evil))  # fmt: skip
    cid = cases.open_case(ledger, f"stall {evil}")
    cases.add_suspect(ledger, cid, f"knob:decode/{K}", f"because {evil}")
    ledger.record_verification(spec_hash="h", ok=True, checks=[read_check(
        {"layer": "live", "service": "decode", "ok": True, "detail": "match", "knob": K,
         "live": evil, "file": evil})])  # fmt: skip
    files = build_docs(decode(LedgerExport, ledger.export()))
    pages = {name: data.decode() for name, data in files.items() if name.endswith(".md")}
    assert any("stall" in page for page in pages.values())
    for name, page in pages.items():
        outside = re.sub(r"`[^`]+`", "", page)
        assert "<script" not in outside, (name, page)
    case_page = pages[f"cases/case-{cid}.md"]
    assert "stall &lt;script>alert(1)&lt;/script>" in case_page
    html = files[f"cases/case-{cid}.html"].decode()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
