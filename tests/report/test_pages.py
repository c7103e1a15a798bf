"""The report's pages as HTML: the markdown converter, and every page (bench run with its server
side, A/B, case) rendered by a real headless Chromium that finds the numbers on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.io.ledger.ledger import Ledger
from servelab.ops.case import case as cases
from servelab.report import pages
from servelab.report.docs import build_docs
from servelab.report.pages import markdown_html, run_markdown
from servelab.report.text import safe_markdown
from tests.support.browser import dump_dom
from tests.support.history import K, incident
from tests.support.sysdeps import chromium

PNG = b"\x89PNG\r\n\x1a\n-not-really"

LEVEL = {
    "concurrency": 64, "n_ok": 99, "n_requests": 100,
    "throughput": {"mean": 4321.5}, "steady_throughput": {"mean": 4400.25},
    "ttft_ms": {"median": 51.25, "p99": 97.5}, "itl_ms": {"median": 20.0, "p99": 21.0},
    "cpu_ms_per_token": 0.0123,
}  # fmt: skip
TELEMETRY = {
    "via": "scrape", "duration_s": 10.0,
    "sources": [
        {"service": "decode", "kind": "engine", "url": "u", "state": "ok", "scrapes": 11,
         "counters": {'sglang:num_requests_total{model_name="sim"}': 100.0},
         "rates": {'sglang:num_requests_total{model_name="sim"}': 10.0}},
        {"service": "router", "kind": "router", "url": "r", "state": "unknown",
         "reason": "HTTP 404 Not Found"},
    ],
}  # fmt: skip
PHASES = {"prefill": {"p50": 6.25, "p90": 7.0, "p99": 9.5}, "kv_transfer": {"p50": 3.5}}
#: A run's ``traces`` as ``record_run`` stores them (the join's summary holds the phases).
TRACES = {
    "summary": {
        "n_requests": 4,
        "n_traced": 3,
        "n_untraced": 1,
        "n_routed": 3,
        "max_abs_gap_ms": 0.0,
        "phases_ms": PHASES,
    },
    "breakdowns": [],
    "untraced": ["r"],
}


def test_public_api() -> None:
    assert {"markdown_html", "run_markdown", "soak_markdown", "PageLink"} <= set(pages.__all__)


def test_markdown_blocks_inline_and_escaping() -> None:
    md = (
        "# Title <x>\n\nSome `a<b>` and **bold** and [case](cases/case-1.md).\n\n"
        "| k | v |\n|---|---:|\n| one | 1 |\n\n- item `code`\n- two\n\n![plot](plots/a.png)\n"
    )
    html = markdown_html(md, {"plots/a.png": PNG})
    assert "<h1>Title &lt;x&gt;</h1>" in html
    assert "<code>a&lt;b&gt;</code>" in html and "<strong>bold</strong>" in html
    assert '<a href="cases/case-1.html">case</a>' in html
    assert "<table>" in html and "<th>k</th>" in html and "<td>1</td>" in html
    assert "<li>item <code>code</code></li>" in html
    assert re.search(r'<img alt="plot" src="data:image/png;base64,', html)


def test_a_run_page_holds_its_level_telemetry_and_phases() -> None:
    run = BenchRunRecord(7, "2026-12-01T00:00:00Z", "base", {}, {
        "level": LEVEL, "telemetry": TELEMETRY, "traces": TRACES}, 100)  # fmt: skip
    md = run_markdown(run)
    assert md.startswith("# Bench run 7: C64 (base)")
    assert "| output tok/s (mean) | 4,321.5 |" in md
    assert "| TTFT ms (p50 / p99) | 51.2 / 97.5 |" in md
    assert '`sglang:num_requests_total{model_name="sim"}` | 100 | 10.00 |' in md
    assert "router (router): unknown (HTTP 404 Not Found)" in md
    assert "| prefill | 6.25 | 7.00 | 9.50 |" in md
    assert "3 of 4 successful request(s) traced (1 untraced" in md


def test_headless_chromium_shows_every_page_with_its_numbers(tmp_path: Path) -> None:
    chromium()  # skips for a developer without it, fails in CI or as root
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        cid = incident(ledger)
        cases.resolve_case(ledger, cid, "client-side proxy", exonerate=[f"knob:decode/{K}"])
        summary = {"level": LEVEL, "telemetry": TELEMETRY, "traces": TRACES}
        run_id = ledger.record_bench_run(label="base", config={}, summary=summary, records=[])
        files = build_docs(decode(LedgerExport, ledger.export()))
    out = tmp_path / "report"
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    index = dump_dom(out / "index.html", tmp_path / "p1")
    assert f'href="runs/run-{run_id}.html"' in index and 'href="ab/ab-1.html"' in index
    assert f'href="cases/case-{cid}.html"' in index
    run = dump_dom(out / f"runs/run-{run_id}.html", tmp_path / "p2")
    assert "<tbody>" in run  # the browser's own addition: it parsed the table
    assert re.search(r"<td>output tok/s \(mean\)</td><td>4,321.5</td>", run)
    assert re.search(r"<td>prefill</td><td>6.25</td>", run)
    ab = dump_dom(out / "ab/ab-1.html", tmp_path / "p3")
    assert re.search(r"<td>C64</td><td>256 → 512</td>", ab)
    assert re.search(r'<img [^>]*src="data:image/png;base64,', ab)
    case = dump_dom(out / f"cases/case-{cid}.html", tmp_path / "p4")
    assert "Agentic sessions stall" in case


@pytest.mark.parametrize(
    "target", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "vbscript:x"]
)
def test_a_link_in_user_text_that_would_run_something_stays_text(target: str) -> None:
    """A case note's ``[click](javascript:...)`` is shown as written, never an ``<a href>``
    (issue: the report turned it into a live ``javascript:`` link); images alike."""
    html = markdown_html(f"note: [click]({target}) and ![x]({target})")
    assert "<a " not in html and "<img" not in html
    assert "[click]" in html
    kept = markdown_html("see [the run](runs/run-1.md) and [docs](https://example.org/a)")
    assert '<a href="runs/run-1.html">the run</a>' in kept
    assert '<a href="https://example.org/a">docs</a>' in kept


def test_a_run_page_shows_a_hostile_label_as_text() -> None:
    """Issue 38, defect D: a run's label ``[x](javascript:…)`` was a live link in its markdown
    page, and a lone backtick in it paired with the page's own code spans."""
    from markdown_it import MarkdownIt

    label = "[x](javascript:alert(1)) ` <img src=x onerror=alert(1)>"
    run = BenchRunRecord(7, "2026-12-01T00:00:00Z", label, {}, {
        "level": LEVEL, "telemetry": TELEMETRY}, 100)  # fmt: skip
    md = safe_markdown(run_markdown(run))
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    found = [t for tok in tokens for t in [tok, *(tok.children or [])]]
    assert not [t for t in found if t.type.startswith("html") or t.type in ("link_open", "image")]
    heading = "".join(t.content for t in tokens[1].children or [])
    assert heading == f"Bench run 7: C64 ({label})"
    assert '`sglang:num_requests_total{model_name="sim"}` | 100 | 10.00 |' in md  # still code
    html = markdown_html(md)
    assert "<img" not in html and "<a " not in html and "[x](javascript:alert(1)) `" in html


def test_the_html_twin_reads_escapes_and_code_spans_as_commonmark_does() -> None:
    html = markdown_html(
        "a \\[x\\](javascript:1) \\`&lt;b> \\*\\*no\\*\\* ``a`b`` `` `c` ``\n\n"
        "| k | v |\n|---|---|\n| ``x\\|y`` | p \\| q |\n"
    )
    assert "a [x](javascript:1) `&lt;b&gt; **no** <code>a`b</code> <code>`c`</code>" in html
    assert "<td><code>x|y</code></td><td>p | q</td>" in html
