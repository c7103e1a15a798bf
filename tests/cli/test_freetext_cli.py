"""Free text typed to be stored (a case's title, a note, a reason, a label) is stored and shown
through the one redaction policy, without control characters, and bounded.

The sixth hostile pass: ``case open 'slow after rotating sk-...'`` and ``case evidence --note
'hf_...; redis://:PW@r'`` were stored and printed whole; an escape sequence in a title set the
terminal's title when ``case list`` printed it; a 100,000-character title was echoed whole.
"""

from __future__ import annotations

import sqlite3
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


def test_a_note_is_stored_whole_its_secret_masked_on_its_own_line(tmp_path: Path) -> None:
    """The thirteenth hostile pass: a note's newline became a space before redaction, so a secret
    masked to the end of its line took the second line with it, in the ledger itself."""
    ledger = tmp_path / "ledger.db"
    assert run_cli("case", "open", "--ledger", str(ledger), "hangs").returncode == 0
    note = "first line token=abc123XYZ then more words\nsecond line stays?"
    done = run_cli("case", "evidence", "1", "--note", note, "--ledger", str(ledger))
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(ledger) as db:
        (stored,) = db.execute("SELECT note FROM case_evidence").fetchone()
    assert stored == "first line token=*** second line stays?"
    shown = run_cli("case", "show", "1", "--ledger", str(ledger))
    assert "second line stays?" in shown.stdout and "abc123XYZ" not in shown.stdout


def test_a_secret_after_a_bare_secret_word_or_as_a_keys_value_is_stored_masked(
    tmp_path: Path,
) -> None:
    """The sixteenth hostile pass: ``--note "secret abc123..."`` (no ``:`` or ``=``) and
    ``--note "foo: token=..."`` (a secret key as an ordinary key's whole value) were stored and
    shown whole; the prose around them stays."""
    ledger = tmp_path / "ledger.db"
    assert run_cli("case", "open", "--ledger", str(ledger), "leak").returncode == 0
    for note in ("secret Bare9PLANTEDabc123", "foo: token=Keyed9PLANTED456",
                 "the secret sauce is garlic"):  # fmt: skip
        done = run_cli("case", "evidence", "1", "--note", note, "--ledger", str(ledger))
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(ledger) as db:
        stored = [row[0] for row in db.execute("SELECT note FROM case_evidence ORDER BY id")]
    assert stored == ["secret ***", "foo: token=***", "the secret sauce is garlic"]
    shown = run_cli("case", "show", "1", "--ledger", str(ledger), "--json")
    assert shown.returncode == 0 and "PLANTED" not in shown.stdout, shown.stdout
    assert "PLANTED" not in ledger.read_bytes().decode("utf-8", "replace")


def test_a_title_over_the_bound_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("case", "open", "--ledger", str(tmp_path / "l.db"), "a" * 100_000)
    assert done.returncode == 2 and "100,000 characters: at most 1,000" in done.stderr
    assert len(done.stderr) < 2_000  # not echoed whole


ROOT = "leaked sk-proj-ROOTPLANTEDAAAAAAAAAAAAAA password=RootPLANTED22 \x1b[31mRED"
OVERRIDE = "because ghp_OVERRIDEPLANTEDBBBBBBBBBBBBBBBBBB \x1b]0;pwn\x07"


def test_a_resolution_s_root_cause_and_override_are_stored_masked(tmp_path: Path) -> None:
    """The seventh hostile pass: ``case resolve --root-cause/--override`` were stored and printed
    raw (secrets, escape sequences, any length)."""
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("case", "open", "--ledger", ledger, "hangs").returncode == 0
    done = run_cli("case", "resolve", "1", "--root-cause", ROOT, "--override", OVERRIDE,
                   "--convict", "component:proxy", "--ledger", ledger)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = run_cli("case", "show", "1", "--ledger", ledger)
    exported = run_cli("ledger", "export", "--ledger", ledger)
    for out in (done, shown, exported):
        assert "PLANTED" not in out.stdout + out.stderr and "\x1b" not in out.stdout, out.stdout
    assert "leaked ***" in shown.stdout, shown.stdout
    assert "PLANTED" not in Path(ledger).read_bytes().decode("utf-8", "replace")
    long = run_cli("case", "resolve", "1", "--root-cause", "a" * 130_000, "--convict",
                   "component:proxy", "--ledger", ledger)  # fmt: skip
    assert long.returncode == 2 and "130,000 characters" in long.stderr and len(long.stderr) < 2_000


def test_a_target_that_is_a_secret_or_a_text_is_refused_unechoed(tmp_path: Path) -> None:
    """``case suspect N component:<token>`` stored and showed the token; a 100,000-character
    component name was stored and printed (the same for resolve's ``--convict``)."""
    ledger = str(tmp_path / "ledger.db")
    assert run_cli("case", "open", "--ledger", ledger, "hangs").returncode == 0
    secret = "component:sk-proj-TARGETPLANTEDAAAAAAAAAAAA"
    for args in (("suspect", "1", secret, "--reason", "r"),
                 ("resolve", "1", "--root-cause", "x", "--convict", secret)):  # fmt: skip
        done = run_cli("case", *args, "--ledger", ledger)
        assert done.returncode == 2 and "looks like a secret" in done.stderr, done.stderr
        assert "PLANTED" not in done.stdout + done.stderr
    huge = run_cli("case", "suspect", "1", "component:" + "a" * 100_000, "--reason", "r",
                   "--ledger", ledger)  # fmt: skip
    assert huge.returncode == 2 and "at most 200" in huge.stderr and len(huge.stderr) < 2_000
    assert "PLANTED" not in Path(ledger).read_bytes().decode("utf-8", "replace")
