"""Free text typed to be stored (a case's title, a note, a reason, a label) is stored and shown
through the one redaction policy, without control characters, and bounded.

The sixth hostile pass: ``case open 'slow after rotating sk-...'`` and ``case evidence --note
'hf_...; redis://:PW@r'`` were stored and printed whole; an escape sequence in a title set the
terminal's title when ``case list`` printed it; a 100,000-character title was echoed whole.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import run_cli

TITLE = "slow after rotating sk-titlePLANTEDAAAAAAAA \x1b]0;OWNED\x07 and\nfake: resolved"
NOTE = "hf_NOTEPLANTEDAAAAAAAAAAAA; redis://:NotePLANTED55@r"


def test_a_title_and_a_note_are_stored_masked_and_without_control_characters(
    tmp_path: Path,
) -> None:
    ledger = str(tmp_path / "ledger.db")
    opened = run_cli("case", "open", "--ledger", ledger, TITLE)
    assert opened.returncode == 0, opened.stderr
    noted = run_cli("case", "evidence", "1", "--note", NOTE, "--ledger", ledger)
    assert noted.returncode == 0, noted.stderr
    shown = run_cli("case", "show", "1", "--ledger", ledger)
    listed = run_cli("case", "list", "--ledger", ledger)
    for done in (opened, shown, listed):
        assert "PLANTED" not in done.stdout and "\x1b" not in done.stdout, done.stdout
    assert "slow after rotating ***" in listed.stdout and "fake: resolved" in listed.stdout
    assert "\nfake: resolved" not in listed.stdout  # the newline did not forge a line
    assert "PLANTED" not in Path(ledger).read_bytes().decode("utf-8", "replace")


def test_a_title_over_the_bound_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("case", "open", "--ledger", str(tmp_path / "l.db"), "a" * 100_000)
    assert done.returncode == 2 and "100,000 characters: at most 1,000" in done.stderr
    assert len(done.stderr) < 2_000  # not echoed whole
