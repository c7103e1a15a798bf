"""A case title with a bidi override (issue 38, the thirteenth pass): ``case open 'slow
\\u202eknob'`` was stored as typed, and ``case show|list``, the markdown page and the HTML drew
the rest of the title backwards (``wonk`` shown as ``knob``). Now every invisible character of a
typed title is stored as its escape, and a title already stored with one (an older servelab, a
hand edit) is shown escaped wherever a case title is printed: text, ``--json``, markdown, HTML.
Real processes, a real ledger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.support import run_cli

#: A bidi override, an isolate, a zero-width space and a private-use character.
HIDDEN = ("\u202e", "\u2066", "\u200b", "\uf8ff")
TITLE = "slow after \u202eknob\u2066 set\u200b\uf8ff"
ESCAPED = "slow after \\u202eknob\\u2066 set\\u200b\\uf8ff"


def _outputs(tmp_path: Path, ledger: str) -> list[str]:
    out = tmp_path / "docs"
    report = run_cli("report", "--out", str(out), "--ledger", ledger)
    assert report.returncode == 0, report.stderr
    pages = [p.read_text("utf-8") for p in sorted(out.rglob("*")) if p.suffix in (".md", ".html")]
    shown = [run_cli("case", *args, "--ledger", ledger) for args in
             (("show", "1"), ("list",), ("show", "1", "--json"), ("list", "--json"))]  # fmt: skip
    assert all(done.returncode == 0 for done in shown), [d.stderr for d in shown]
    case_pages = [page for page in pages if "slow after" in page]
    assert case_pages, "the case's title is on no page"
    return [done.stdout for done in shown] + case_pages


def _clean(texts: list[str]) -> None:
    for text in texts:
        assert not any(char in text for char in HIDDEN), ascii(text[:2000])
        assert "slow after" in text and "u202eknob" in text


def test_a_typed_title_s_invisible_characters_are_stored_escaped(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.db")
    opened = run_cli("case", "open", "--ledger", ledger, TITLE)
    assert opened.returncode == 0, opened.stderr
    assert ESCAPED in opened.stdout and "\u202e" not in opened.stdout
    _clean(_outputs(tmp_path, ledger))


def test_a_title_stored_with_a_bidi_override_is_shown_escaped(tmp_path: Path) -> None:
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("case", "open", "--ledger", ledger, "placeholder").returncode == 0
    conn = sqlite3.connect(ledger)  # as an older servelab, or a hand edit, stored it
    conn.execute("UPDATE cases SET title = ? WHERE id = 1", (TITLE,))
    conn.commit()
    conn.close()
    _clean(_outputs(tmp_path, ledger))
