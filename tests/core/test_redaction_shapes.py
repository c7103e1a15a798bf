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
    """An ordinary header's name in text is not secret-looking; as a stored ``--header``, only a
    standard plain header keeps its value (a vendor's ``X-Tenant`` is masked: the thirteenth
    pass)."""
    assert not is_secret_header(name)
    kept = name in ("Accept", "Content-Type", "User-Agent")
    assert redact_headers([(name, "plain-value")]) == ((name, "plain-value" if kept else REDACTED),)


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


# The twelfth pass (H3): name/value pairs, Unicode spaces around the separator, and the medium
# shapes (a header pair list, ``pwd=X``, ``password\r=X``, ``password -> X``, bypass/cert headers).
PLANTED = "Zq8sKx2PlantedValue"


@pytest.mark.parametrize(
    "text",
    [
        "env:\n- name: DB_PASSWORD\n  value: " + PLANTED + "\n- name: PORT\n  value: '8080'\n",
        "        - name: DB_PASSWORD\n          value: " + PLANTED + "\n",
        '- name: API_KEY\n  # a comment\n  value: "' + PLANTED + '"\r\n',
        '{\n    "name": "HF_TOKEN",\n    "value": "' + PLANTED + '"\n}',
        "- value: " + PLANTED + "\n  name: DB_PASSWORD\n- value: x\n  name: PORT",
        '{\n  "value": "' + PLANTED + '",\n  "name": "API_KEY"\n}',
        "env: [{name: API_KEY, value: " + PLANTED + "}]",
        '{"key":"password","value":"' + PLANTED + '"}',
        '{"name":"API_KEY","value":"' + PLANTED + '"}',
        '[{"Value": "' + PLANTED + '", "Name": "db_secret"}]',
        "PASSWORD\u00a0=\u00a0" + PLANTED,
        "PASSWORD\u2003:\u2003" + PLANTED,
        "api_key\u3000=" + PLANTED,
        "token\u202f:" + PLANTED,
        "api_key:\u00a0\n  " + PLANTED + "\n",
        "api_key:\u00a0|\n  " + PLANTED + "\n",
        '[["Authorization","' + PLANTED + '"]]',
        "headers=[('X-Api-Key', '" + PLANTED + "')]",
        "pwd=" + PLANTED,
        "started\npwd=" + PLANTED + "\n",
        "user=u pwd=" + PLANTED + " host=h",
        "password\r=" + PLANTED,
        "password -> " + PLANTED,
        "password => " + PLANTED,
        "this->password = " + PLANTED,
        "a -> api_key: " + PLANTED,
        "X-Vercel-Protection-Bypass: " + PLANTED,
        "x-client-cert=" + PLANTED,
    ],
)
def test_a_twelfth_pass_shape_is_masked(text: str) -> None:
    said = redact(text)
    assert PLANTED not in said and REDACTED in said, repr(said)


def test_a_pair_keeps_its_shape_and_its_neighbours() -> None:
    text = "- name: DB_PASSWORD\n  value: " + PLANTED + "\n- name: PORT\n  value: '8080'"
    assert redact(text) == "- name: DB_PASSWORD\n  value: ***\n- name: PORT\n  value: '8080'"
    assert redact('{"name":"API_KEY","value":"' + PLANTED + '"}') == (
        '{"name":"API_KEY","value":"***"}'
    )
    assert redact('[["Authorization","' + PLANTED + '"]]') == '[["Authorization","***"]]'


@pytest.mark.parametrize(
    "text",
    [
        "- name: PORT\n  value: '8080'\n- name: MODEL\n  value: qwen-7b",
        "- name: PORT\n  value: '8080'\n- name: DB_PASSWORD\n  valueFrom: {}",
        '[\n  {\n    "name": "PORT",\n    "value": "8080"\n  },\n  {\n    "name": "API_KEY",\n'
        '    "valueFrom": {}\n  }\n]',
        '{"name": "model", "value": "qwen-7b"}',
        "env: [{name: LOG_LEVEL, value: debug}]",
        '[["Accept","application/json"]]',
        "- name: DB_PASSWORD\n  valueFrom:\n    configMapKeyRef: {name: db}",
        "the password is strong enough",  # ``is`` is prose, not a separator
        "prefill -> decode: 3 requests",
        "PWD=/home/user",
        "PWD=$HOME",
        "pwd = the working directory",
        "Total:\u00a0512 tokens",
        "X-Request-Id: abc-123-def",
    ],
)
def test_ordinary_pairs_and_prose_are_kept(text: str) -> None:
    assert redact(text) == text


def test_bypass_and_cert_are_secret_only_as_a_header() -> None:
    for name in ["X-Vercel-Protection-Bypass", "X-Client-Cert", "X-SSL-Client-Certificate"]:
        assert is_secret_header(name)
        assert redact_headers([(name, PLANTED)]) == ((name, REDACTED),)
    assert not is_secret_name("--bypass") and not is_secret_name("cert_path")
    assert redact("--ssl-certfile /etc/tls/cert.pem") == "--ssl-certfile /etc/tls/cert.pem"


@pytest.mark.parametrize(
    "text",
    ["- name: PASSWORD\n" + "  x: 1\n" * 12_500, "name: token\n" * 12_500,
     "{name: key, value: " + "v" * 1990 + "}" * 125, "[('Cookie', '" + " " * 125_000,
     "password\u00a0" * 25_000, "- name: API_KEY\n  value: a" + " " * 75_000 + "b",
     '{"a": "' + " " * 1990 + ", " * 75_000, "a->" * 75_000, "a => " * 50_000,
     "  value: x\n" * 12_500 + "  name: token\n" * 12_500, (":" + "\u00a0" * 1000) * 250,
     "- name: API_KEY\n  value: a" + " " * 75_000 + ",,", "name: a" + " " * 75_000 + ",,x",
     ("{" + "a" * 1998 + "}") * 125 + "value"],
)  # fmt: skip
def test_hostile_pairs_take_linear_time(text: str) -> None:
    """A quarter of a megabyte or so: a quadratic rule takes minutes at this size."""
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 10


# The thirteenth pass: a header's ``Name: value`` in free text, read by the header rule when the
# key is written as a header's name; ordinary headers and log keys stay.
@pytest.mark.parametrize(
    "text",
    [
        "X-Authentication: " + PLANTED,
        "X-Authn: " + PLANTED,
        "Session-Id: " + PLANTED,
        "Cf-Access-Jwt-Assertion: " + PLANTED,
        "Ssl-Client-Cert: " + PLANTED,
        "got header Proxy-Authorization: Basic " + PLANTED,
        'Authorization: Digest username="u", response="' + PLANTED + '"',
        "proxy-authorization: Negotiate x, " + PLANTED,
        'headers=[(b"x-api-key", b"' + PLANTED + '")]',
        "[(b'authorization', b'Bearer " + PLANTED + "')]",
    ],
)
def test_a_header_pair_in_free_text_is_masked(text: str) -> None:
    said = redact(text)
    assert PLANTED not in said and REDACTED in said, repr(said)


@pytest.mark.parametrize(
    "text",
    ["Content-Type: application/json", "X-Request-Id: req-4242", "Accept: text/event-stream",
     "Access-Control-Allow-Origin: https://ui.example", "Access-Control-Allow-Credentials: true",
     "session_id: conv-000017", "access-log: true", "Access: granted", "Connection: keep-alive",
     "X-Authenticated-User: alice"],
)  # fmt: skip
def test_an_ordinary_header_or_log_key_in_free_text_stays(text: str) -> None:
    assert redact(text) == text


# The sixteenth pass (issue 38): a secret after a bare "secret " (no ``:`` or ``=``) in a note,
# and a secret key that is an ordinary key's whole value (``foo: token=...``), were kept.
@pytest.mark.parametrize(
    ("text", "kept"),
    [("secret abc123def456ghi789", "secret ***"),
     ("secret sk-abc123def456ghi789", "secret ***"),
     ("the secret abc123def456ghi789 was rotated", "the secret *** was rotated"),
     ("my secret is Hunter2hunter2", "my secret is ***"),
     ("Password\tp4ssw0rd!x", "Password\t***"),
     ("token t0k3nVALUE and more", "token *** and more"),
     ("api key QmFzZTY0U2VjcmV0VmFsdWU", "api key ***"),
     ("passphrase was ZQ8PLANTEDVALUE9", "passphrase was ***"),
     ("foo: token=abc123456789", "foo: token=***"),
     ("note: secret abc123def456ghi789", "note: secret ***"),
     ("foo=token=abc123456789", "foo=token=***"),
     ("run: password=abc123456789, port: 80", "run: password=***, port: 80"),
     # the eighteenth pass: quoted, after "was:", a dash or an arrow, and more secret words
     ('db password is "Hunter2x9q"', 'db password is "***"'),
     ("admin password was: Zebra7731k, and token `Tk9988abc`",
      "admin password was: ***, and token `***`"),
     ("password - Zebra7731k", "password - ***"),
     ("password \u2192 Zebra7731k", "password \u2192 ***"),
     ("pwd Zebra7731k", "pwd ***"), ("credentials Zebra7731k", "credentials ***")],
)  # fmt: skip
def test_a_secret_after_a_bare_secret_word_or_as_a_keys_whole_value_is_masked(
    text: str, kept: str
) -> None:
    assert redact(text) == kept


@pytest.mark.parametrize(
    "text",
    ["the secret sauce is garlic", "keep this secret please", "secret santa 2026",
     "the password is strong enough", "token usage: 0.00", "token 12 of 4096",
     "password reset for user42", "max_total_tokens 4096", "tokens abc123def",
     "secret-santa abc123", "api key rotation v2", "time per output token 12.5ms/tok",
     "first token 123456ms", "url: https://h/x?a=b", "mode: sorted", "password-reset flow",
     'the "token" field', "credentials - see the vault"],
)  # fmt: skip
def test_prose_after_a_secret_word_is_kept(text: str) -> None:
    """No over-masking: a word after ``secret``/``password``/``token`` is masked only when it
    is shaped like a secret (letters and digits mixed, or a long mixed-case run)."""
    assert redact(text) == text
