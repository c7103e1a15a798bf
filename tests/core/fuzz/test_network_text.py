"""The fuzz tier over what the eighth hostile pass added (issue 38): the bounds' parsers
(``--repeat``, ``--workers``, ``--effect``), a router's worker list (any body: its workers or a
:class:`~servelab.errors.WorkerListError`, the router's strings printable), the one sanitizer of
network text, and the redaction policy over hostile text (never an exception; a planted secret
under a secret name, a homoglyph's, an XML element's, an encoded one, a Kubernetes env pair's,
one after a no-break space, never kept)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from servelab.core import bounds
from servelab.core.printable import printable
from servelab.core.redaction import REDACTED, redact, redact_headers
from servelab.errors import WorkerListError
from servelab.io.routerworkers import parse_worker_list
from tests.core.fuzz.support import mutated, result_or_error, texts

_CONTROLS = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x202E]]
_LIST = json.dumps(
    {"workers": [{"id": "a", "url": "http://h:1", "worker_type": "decode", "status": "ready"}]}
)


@pytest.mark.parametrize(
    "parse",
    [getattr(bounds, name) for name in bounds.__all__ if name.startswith("parse_")],
    ids=lambda f: f.__name__,
)
@given(text=texts)
def test_every_bound_value(parse: Callable[[str], Any], text: str) -> None:
    result_or_error(parse, text)


@given(body=st.one_of(texts, mutated(_LIST)))
def test_any_worker_list_body_gives_workers_or_one_error(body: str) -> None:
    got = result_or_error(parse_worker_list, "http://r/workers", body, errors=(WorkerListError,))
    if isinstance(got, WorkerListError):
        assert not any(c in str(got) for c in _CONTROLS), repr(str(got))
        return
    for worker in got:
        shown = worker.id + worker.url + worker.role + (worker.status or "")
        assert not any(c in shown for c in _CONTROLS), repr(shown)


@given(text=texts)
def test_printable_escapes_every_control_and_keeps_the_rest(text: str) -> None:
    shown = printable(text)
    assert not any(c in shown for c in _CONTROLS)
    if not any(c in text for c in _CONTROLS):
        assert shown == text


_SECRET = "Zq8PLANTEDvalue"


@given(
    noise=texts,
    form=st.sampled_from(
        ["X-Session: {}", "p\u0430ssword: {}", "<apiKey>{}</apiKey>", "api-key:\n  {}",
         "GET /v1?token%3D{}", "GET /v1?access%5Ftoken={}", "password\t{}",
         '{{"pass\\u0077ord": "{}"}}', "pass\u00adword: {}", "pa\u0301ssword: {}",
         "\u1d18assword: {}", "api_\u1d0bey={}", "pass\u034fword={}",
         "- name: DB_PASSWORD\n  value: {}", '{{"name":"API_KEY","value":"{}"}}',
         "env: [{{name: API_KEY, value: {}}}]", '{{"key":"password","value":"{}"}}',
         "PASSWORD\u00a0=\u00a0{}", "token\u2003:\u2003{}", '[["Authorization","{}"]]',
         "pwd={}", "password\r={}", "password -> {}", "X-Client-Cert: {}",
         "X-Vercel-Protection-Bypass: {}"]
    ),
)  # fmt: skip
def test_a_secret_in_any_new_shape_never_survives_redaction(noise: str, form: str) -> None:
    said = redact(noise.replace("\n", " ").replace("<", " ") + "\n" + form.format(_SECRET))
    assert _SECRET not in said, repr(said)


@given(
    name=st.sampled_from(["X-Session-Id", "x-session-id", "X-Access", "X-Access-Token",
                          "X-AccessToken", "x_access_token", "Session-Id", "X-CSRF-Token"]),
    value=texts,
)  # fmt: skip
def test_a_session_or_access_header_is_never_stored(name: str, value: str) -> None:
    """Issue 38, the tenth pass: ``--header 'X-Session-Id: ...'`` was stored verbatim."""
    assert redact_headers([(name, value + _SECRET)]) == ((name, REDACTED),)


@given(
    indent=st.integers(0, 12),
    name=st.sampled_from(["DB_PASSWORD", "API_KEY", "hf_token", "x-client-cert", "SECRET"]),
    quote=st.sampled_from(["", '"', "'"]),
    json_style=st.booleans(),
    body=st.from_regex(r"[A-Za-z0-9_./+=-]{6,30}", fullmatch=True),
)
def test_a_secret_env_pair_is_masked_at_any_indent_and_quoting(
    indent: int, name: str, quote: str, json_style: bool, body: str
) -> None:
    """Issue 38, the twelfth pass (H3): ``- name: DB_PASSWORD`` then ``value: X`` below it."""
    pad, value = " " * indent, f"{quote}Zq{body}{quote}"
    if json_style:
        text = f'{pad}{{\n{pad}  "name": "{name}",\n{pad}  "value": {value}\n{pad}}},'
    else:
        text = f"{pad}- name: {quote}{name}{quote}\n{pad}  value: {value}\n{pad}- name: PORT"
    assert f"Zq{body}" not in redact(text)


@given(
    name=st.sampled_from(["PORT", "MODEL", "LOG_LEVEL", "tokenizer_path", "max_total_tokens"]),
    body=st.from_regex(r"[a-z0-9./]{1,30}", fullmatch=True),  # no token shape
)
def test_an_ordinary_env_pair_is_kept(name: str, body: str) -> None:
    text = f"- name: {name}\n  value: {body}\n{{name: {name}, value: {body}}}"
    assert redact(text) == text
