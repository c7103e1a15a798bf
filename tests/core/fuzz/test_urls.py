"""The fuzz tier over the one parser of a server URL a user types (issue 38, fourteenth pass:
``init --router 'http://[::1'`` ended in an unexpected ValueError): any text gives an
:class:`~servelab.core.urls.HttpUrl` or a :class:`~servelab.errors.UrlError`, never another
exception; what it takes, urllib reads alike (scheme, host, port); a URL built from its parts
reads back as those parts; a planted password is never in an error."""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import assume, given
from hypothesis import strategies as st

from servelab.core.urls import HttpUrl, parse_http_url, parse_url
from servelab.errors import OptionError, UrlError
from tests.core.fuzz.support import mutated, result_or_error, texts

_PASSWORD = "Zq8PLANTEDpw"
_names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,10}){0,3}", fullmatch=True)
_ipv4 = st.ip_addresses(v=4).map(str)
_ipv6 = st.ip_addresses(v=6).map(str)
_paths = st.from_regex(r"(/[A-Za-z0-9._~-]{0,12}){0,4}", fullmatch=True)
_users = st.none() | st.from_regex(r"[A-Za-z0-9._~-]{1,12}", fullmatch=True)


@st.composite
def _urls(draw: st.DrawFn) -> HttpUrl:
    user = draw(_users)
    return HttpUrl(
        draw(st.sampled_from(["http", "https"])),
        draw(_names | _ipv4 | _ipv6),
        draw(st.none() | st.integers(1, 65535)),
        draw(_paths),
        user,
        None if user is None else draw(st.none() | st.just(_PASSWORD)),
    )


@given(text=texts | mutated("http://u:pw@[::1]:30001/v1") | mutated("https://h.example:443/v1"))
def test_any_text_is_a_url_or_one_error(text: str) -> None:
    got = result_or_error(parse_http_url, text, errors=(UrlError,))
    if isinstance(got, UrlError):
        assert got.why and "\n" not in str(got)
        return
    assert isinstance(got, HttpUrl)
    parts = urlsplit(text)  # what the HTTP clients read of it agrees
    assert (parts.scheme, parts.hostname, parts.port) == (got.scheme, got.host.lower(), got.port)
    assert 1 <= (got.port or 80) <= 65535 and not parts.query and not parts.fragment


@given(url=_urls())
def test_a_url_built_from_its_parts_reads_back_as_them(url: HttpUrl) -> None:
    assert parse_http_url(str(url)) == url
    assert _PASSWORD not in url.shown and _PASSWORD not in repr(url)
    assert parse_url(str(url)) == str(url)


@given(url=_urls(), noise=texts, at=st.integers(0, 80))
def test_a_password_is_never_in_an_error(url: HttpUrl, noise: str, at: int) -> None:
    assume(url.password is not None)
    text = str(url)
    cut = min(at, len(text))
    broken = text[:cut] + noise + text[cut:]
    assume(_PASSWORD in broken and "@" in broken[broken.index(_PASSWORD) :])
    for parse in (parse_http_url, parse_url):
        got = result_or_error(parse, broken, errors=(UrlError, OptionError))
        if isinstance(got, (UrlError, OptionError)):
            assert _PASSWORD not in str(got), str(got)
