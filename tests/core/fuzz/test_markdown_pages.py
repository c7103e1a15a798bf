"""The fuzz tier over the markdown pages ``docs`` writes (issue 38, defect D): whatever a user
puts in a case's title, a note, a suspect's target and reason, a knob change's values and reason,
the pages a CommonMark renderer reads (markdown-it-py, with GFM's pipe tables) hold no raw HTML
and no link or image from that text, and the HTML twins no tag of it. A lone backtick used to
shift the page's code-span pairing so that a later ``<script>`` was left raw; a
``[x](javascript:…)`` title was a live link."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from servelab.report.docs import build_docs
from tests.core.fuzz.support import texts

K = "SGLANG_SM120_MMA_TARGET_CTAS"
_HOSTILE = ["`", "``", "<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
            "[x](javascript:alert(1))", "![i](x)", "<http://evil>", "|", "\\", "\n", "\r\n",
            "&lt;b>", "**", "_", "[a]: http://evil", "<!-- c -->"]  # fmt: skip
#: User text: random text, or pieces that mean something in markdown put together.
user = st.one_of(texts, st.lists(st.sampled_from(_HOSTILE) | texts, max_size=6).map("".join))
_RENDER = MarkdownIt("commonmark").enable("table")


def _tokens(tokens: list[Token]) -> list[Token]:
    return [t for tok in tokens for t in [tok, *_tokens(tok.children or [])]]


def _pages(title: str, note: str, reason: str, value: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp, Ledger.open(Path(tmp) / "ledger.db") as ledger:
        ledger.add(KnobChangeRecord(id=0, at=NOW, service="decode", name=K, old=value,
                                    new=f"5`{value}", reason=reason))  # fmt: skip
        cid = cases.open_case(ledger, title.strip() or "x")
        cases.add_suspect(ledger, cid, f"knob:decode/{K}", reason)
        cases.add_evidence(ledger, cid, "note", note=note or "n")
        files = build_docs(decode(LedgerExport, ledger.export()))
    return {name: data.decode() for name, data in files.items() if name.endswith((".md", ".html"))}


@given(title=user, note=user, reason=user, value=user)
@example(title="a ` b", note="<img src=x onerror=alert(1)>", reason="r", value="x")
@example(title="[x](javascript:alert(1))", note="[y](https://evil)", reason="![i](x)", value="|")
def test_user_text_in_a_page_is_never_html_nor_a_link(
    title: str, note: str, reason: str, value: str
) -> None:
    pages = _pages(title, note, reason, value)
    for name, page in pages.items():
        if name.endswith(".html"):
            if name != "index.html":  # a page's twin: no tag or link of the user's text
                assert not re.search(r"<(script|img|a|iframe)\b", page, re.I), (name, page)
            continue
        found = _tokens(_RENDER.parse(page))
        raw = [t.content for t in found if t.type in ("html_inline", "html_block")]
        assert not raw, (name, raw, page)
        links = [t for t in found if t.type in ("link_open", "image")]
        assert not links, (name, [t.attrs for t in links], page)
    # The title reads as written (a line ending as a blank) in the case page's heading.
    heading = _RENDER.parse(pages["cases/case-1.md"])[1].children or []
    shown = "".join(t.content for t in heading if t.type in ("text", "code_inline"))
    written = re.sub(r"\r\n|\r|\n", " ", title.strip() or "x").replace("\x00", "\ufffd")
    # (a heading drops its closing #s and blanks; a control character is stored escaped)
    if written.isascii() and written.isprintable() and not re.search(r"[#\s]$", written):
        assert shown == f"Case 1: {written}", (shown, written)
