"""The fuzz tier over a header's ``Name: value`` in free text (issue 38, the thirteenth pass):
whatever surrounds it on its line and around it, a secret-looking header written as a header's
name has its value masked, in any case and with any separator spacing; an ordinary header's
value stays."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from servelab.core.options import parse_header
from servelab.core.redaction import redact
from servelab.errors import OptionError

SECRET_HEADERS = ["X-Api-Key", "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie",
                  "X-Auth-Token", "X-Authentication", "Session-Id", "X-Session-Id",
                  "Cf-Access-Jwt-Assertion", "Ocp-Apim-Subscription-Key", "X-Client-Secret",
                  "X-Amz-Security-Token", "Private-Token"]  # fmt: skip
ORDINARY_HEADERS = ["Content-Type", "X-Request-Id", "Accept", "User-Agent", "Connection",
                    "Access-Control-Allow-Origin", "X-Forwarded-For"]  # fmt: skip
#: A value a log line would show: letters and digits, long enough to be masked by its text.
values = st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789",
                 min_size=8, max_size=40)  # fmt: skip
#: A line's words before the pair (a timestamp, a level, a direction mark).
prefixes = st.sampled_from(["", "> ", "< ", "2026-12-06T03:40:00Z INFO ", "hdr ", "\t"])
gaps = st.sampled_from([": ", ":", " : ", ":\t", "=", " = "])
# Lines around the pair, without a ``:`` or ``=`` that would make them one key's value.
around = st.lists(st.text(alphabet="abc xyz.-_0189", max_size=30), max_size=3)


@given(name=st.sampled_from(SECRET_HEADERS), value=values, prefix=prefixes, gap=gaps,
       before=around, after=around, lower=st.booleans())  # fmt: skip
def test_a_secret_header_s_value_in_free_text_is_masked(
    name: str,
    value: str,
    prefix: str,
    gap: str,
    before: list[str],
    after: list[str],
    lower: bool,
) -> None:
    name = name.lower() if lower and name.lower().startswith("x-") else name
    text = "\n".join([*before, f"{prefix}{name}{gap}{value}", *after])
    assert value not in redact(text), text


@given(name=st.sampled_from(ORDINARY_HEADERS), value=values, prefix=prefixes)
def test_an_ordinary_header_s_value_stays(name: str, value: str, prefix: str) -> None:
    text = f"{prefix}{name}: {value}"
    assert redact(text) == text


#: What HTTP/1.1 carries the same way through every client: visible US-ASCII, space, tab.
FIELD = "".join(chr(c) for c in range(0x20, 0x7F)) + "\t"


@given(name=st.sampled_from(SECRET_HEADERS + ORDINARY_HEADERS[:1]),
       before=st.text(alphabet=FIELD, max_size=30), after=st.text(alphabet=FIELD, max_size=30),
       bad=st.characters(exclude_characters=FIELD))  # fmt: skip
def test_a_header_value_outside_visible_ascii_is_refused_naming_only_the_header(
    name: str, before: str, after: str, bad: str
) -> None:
    """Issue 38, the fifteenth pass: DEL, any control character and anything not US-ASCII are
    refused up front (exit 2 at the CLI), naming the header, never quoting its value."""
    value = f"sk-PLANTED1{before}{bad}{after}"
    try:
        parse_header(f"{name}: {value}")
    except OptionError as refused:
        assert name in str(refused) and "PLANTED1" not in str(refused)
    else:
        raise AssertionError(f"accepted {bad!r}")


@given(value=st.text(alphabet=FIELD, max_size=60))
def test_a_visible_ascii_header_value_is_taken_and_sends_the_same_bytes_everywhere(
    value: str,
) -> None:
    _, taken = parse_header(f"X-Tenant:{value}")
    assert taken == value.strip() and taken.encode("latin-1") == taken.encode("utf-8")
