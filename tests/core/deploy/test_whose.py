"""Whose another deployment's process is, told from its mark against this deployment's own
(issue 38, nineteenth pass, item 3), and its words: a copy of this spec with another state
folder is never named by this deployment's own name alone."""

from __future__ import annotations

import pytest

from servelab.cli.boundary import _message, exit_code
from servelab.core.deploy.refusals import AnothersProcess, AnothersProcesses, VerifyRefused
from servelab.core.deploy.whose import Others, Whose, others_of
from servelab.report.othersrecord import whose_mark, whose_words

OURS = "test-pd/decode@local:9#0123456789abcdef"


@pytest.mark.parametrize(
    ("found", "expected", "mark"),
    [
        ("beta/decode@local:9#aaaaaaaaaaaaaaaa", Others("beta", "local:9", Whose.NAMED), "beta's"),
        ("test-pd/decode@local:7#aaaaaaaaaaaaaaaa",
         Others("test-pd", "local:7", Whose.ADDRESS), "test-pd@local:7's"),
        ("test-pd/decode@local:9#aaaaaaaaaaaaaaaa",
         Others("test-pd", "local:9", Whose.STATE_FOLDER), "another state folder's"),
        ("test-pd/decode@local:9", Others("test-pd", "local:9", Whose.STATE_FOLDER),
         "another state folder's"),
        ("test-pd/decode", Others("test-pd", None, Whose.ADDRESS), "another test-pd's"),
    ],
)  # fmt: skip
def test_others_of_tells_a_copy_of_this_spec(found: str, expected: Others, mark: str) -> None:
    assert others_of(found, OURS) == expected
    assert whose_mark(expected) == mark


def test_a_hostile_name_is_escaped_and_cut() -> None:
    others = others_of("\x1b[2J" + "n" * 10_000 + "/decode@local:9", OURS)
    for said in (whose_mark(others), whose_words(others)):
        assert "\x1b" not in said and "…" in said and len(said) < 200, said


def test_verify_refused_is_worded_in_report_and_exits_1() -> None:
    whose = others_of("test-pd/decode@local:9#aaaaaaaaaaaaaaaa", OURS)
    exc = VerifyRefused(AnothersProcesses((AnothersProcess("decode", "local", 42, whose),)))
    said = _message(exc)
    assert said.startswith(
        "verify refused: decode (pid 42 on local) is a process of deployment "
        "test-pd run from another state folder, not this deployment's"
    ), said
    assert exit_code(exc) == 1 and isinstance(exc, RuntimeError)
