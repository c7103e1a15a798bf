"""Redaction shapes that were stored verbatim (issue 38, the tenth pass): session and access
headers from ``--header``, a key written with a JSON escape, a tab between key and value, and
key names hiding a soft hyphen, a combining mark or a small capital. One policy: the name rule
(:mod:`servelab.core.secretnames`) read through :func:`~servelab.core.confusables.fold`."""

from __future__ import annotations

import time

import pytest

from servelab.core.confusables import fold
from servelab.core.redaction import REDACTED, redact, redact_headers
from servelab.core.secretnames import is_secret_header, is_secret_name

SECRET = "Zq8PLANTEDvalue"


@pytest.mark.parametrize(
    "name",
    ["X-Session-Id", "x-session-id", "Session-Id", "X-Access", "X-Access-Token",
     "X-AccessToken", "x_access_token", "X-Access-Tok", "X-CSRF-Token", "X-XSRF-TOKEN"],
)  # fmt: skip
def test_a_session_or_access_header_is_redacted(name: str) -> None:
    assert is_secret_header(name)
    assert redact_headers([(name, SECRET)]) == ((name, REDACTED),)


@pytest.mark.parametrize(
    "name", ["Accept", "Content-Type", "X-Request-Id", "X-Tenant", "User-Agent"]
)
def test_an_ordinary_header_is_kept(name: str) -> None:
    assert not is_secret_header(name)
    assert redact_headers([(name, "plain-value")]) == ((name, "plain-value"),)


def test_session_id_stays_an_ordinary_name_outside_headers() -> None:
    """A trace's ``session_id`` and an A/B journal's are not secrets (only as a header)."""
    assert not is_secret_name("session_id") and not is_secret_name("X-Access")


@pytest.mark.parametrize(
    "text",
    [
        '{"pass\\u0077ord": "' + SECRET + '"}',
        '{"\\u0070assword":"' + SECRET + '"}',
        '{"url": "x", "to\\u006ben": "' + SECRET + '"}',
        "password\t" + SECRET,
        "count\t3\tpassword\t" + SECRET,
        "pass\u00adword: " + SECRET,
        "pa\u0301ssword: " + SECRET,
        "pass\u034fword=" + SECRET,
        "\u1d18assword: " + SECRET,
        "api_\u1d0bey=" + SECRET,
        "\u1d1b\u1d0f\u1d0b\u1d07\u0274=" + SECRET,
    ],
)
def test_a_secret_key_in_a_new_shape_is_masked(text: str) -> None:
    said = redact(text)
    assert SECRET not in said and REDACTED in said, repr(said)


def test_fold_reads_marks_small_capitals_and_soft_hyphens_away() -> None:
    assert fold("pa\u0301ss\u00adword") == "password"
    assert fold("\u1d18\u1d00\ua731\ua731\u1d21\u1d0f\u0280\u1d05") == "password"
    assert fold("PASSWORD") == "PASSWORD"  # ASCII as it is


def test_ordinary_tab_separated_text_is_kept() -> None:
    assert redact("name\tvalue other\ncount\t3") == "name\tvalue other\ncount\t3"


@pytest.mark.parametrize(
    "text",
    ["\\u0077" * 30_000, '"' + "\\x41" * 30_000 + '"', "a\u0301" * 50_000, "a\u00ad" * 50_000,
     "a\ufe0f" * 50_000, "pass\u00ad" * 20_000 + "word: x"],
)  # fmt: skip
def test_long_runs_of_escapes_and_marks_take_linear_time(text: str) -> None:
    """A key may hold escapes and marks now, but never starts inside one: 180,000 characters of
    ``\\u0077`` took 265 s (a try at every ``u``, each to the end of the run), now well under
    a second."""
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 10
