"""The one redaction policy: what servelab shows, stores and exports never carries a secret.

Every text servelab quotes from elsewhere (a service's log tail, a launch error, an error line)
and every value it stores that a user typed as a secret goes through here:

- **env values**: every value of a service's env file (:func:`secret_values`); a value shorter
  than :data:`MIN_REDACTED_CHARS` is left, as it cannot be told from the ordinary words and
  numbers of a log line (``true``, ``512``), and replacing it would blank them all while hiding
  nothing a reader could not guess. A value never spans lines (an env file holds one per line), so
  a tail that starts with whole lines holds no value cut in two;
- **argument values after secret-looking flags** (``--api-key X``, ``--token=X``, ``--password``,
  ``--secret``, ``--hf-token``...), inside an env value too (the ``args_env`` variable such as
  ``SGLANG_ARGS="... --api-key sk-..."``: its words are secrets one by one, not only whole);
- **header values**: as ``bench``/``soak --header`` stores them, every value but a standard
  plain header's (``Accept``, ``Content-Type``, ``User-Agent``, ...: :func:`redact_headers`); in
  text, those of secret-looking names (``Authorization``, ``Cookie``, ``*-Key``, ``*-Token``, and
  for an ``X-`` key a session's or an access grant's: ``X-Session-Id``, ``X-Access``);
- **knob values of secret-looking names** (an env knob ``ROUTER_API_KEY``, an argument
  ``--api-key``): :func:`mask`, and ``masked_serializer`` (:mod:`servelab.core.redacted`) for the
  records that carry them, so ``knob get/set/diff``, ``verify`` and the ledger show and store
  ``***`` (the comparisons, made on the real values before, stay right; a secret knob's old value is
  therefore not in the ledger: its backups hold it); a knob of an ordinary name whose value is
  secret-shaped (``knob set X=sk-...``, a URL with a password) is set on the engine as typed, and
  shown and stored with that shape masked (:func:`mask`);
- **tokens of well-known shapes** (``sk-...``, ``hf_...``, ``ghp_...``, ``github_pat_...``,
  ``xoxb-...``, ``AKIA...``, GitLab's ``glpat-...``, Stripe's ``sk_live_...``, Google's
  ``AIza...``, ``npm_...``, ``pypi-...``, a JWT ``eyJ....eyJ....sig``), a bearer token
  (``Bearer X`` in any case, with or without ``Authorization:`` before it) and **URL query
  parameters of secret-looking names** (``?token=...``, a signed URL's ``sig``) wherever they
  stand;
- **values of secret-looking keys** in text (``api-key: "sk-..."`` of a YAML file, ``API_KEY=...``,
  ``Authorization: Bearer ...``, a logfmt line's ``token=...`` after other keys): :func:`redact`
  replaces them wherever they appear (a tail quoting such a line shows ``api-key: ***``), with
  ``:``, ``=`` or a tab between key and value (``password<TAB>...``), a key written with a JSON
  escape (``"pass\\u0077ord"``), a soft hyphen or a combining mark in it; a secret key that is
  an ordinary key's whole value (``foo: token=...``);
- **a word shaped like a secret after a bare secret-looking word** (``secret X``, ``my password
  is X``, ``token X``; no ``:`` or ``=``: :mod:`servelab.core.prosesecret`); prose stays;
- **listed forms** (:mod:`servelab.core.listed`): the element after a secret flag in an argv list
  as ``CalledProcessError`` or JSON prints it (``['--api-key', '***']``) and ODBC's ``Pwd=`` in a
  connection string; **credentials in command text** (:mod:`servelab.core.credentials`).

Which names are secret-looking is :mod:`servelab.core.secretnames` (:func:`is_secret_name`, read
through :func:`~servelab.core.confusables.fold`): ``--max-total-tokens``, ``--tokenizer-path``
and ``--bypass`` are not, ``--hf-token``, ``X-Api-Key`` and ``ᴘassword`` are. Parsers never
quote a line in their errors (env files, config YAML: :mod:`servelab.core.knobs.configyaml`);
what would slip through is caught by the key patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from servelab.core.credentials import SHAPED, mask_credentials
from servelab.core.listed import mask_encoded, mask_listed
from servelab.core.paired import mask_pairs
from servelab.core.prosesecret import PROSE_WORDS, mask_prose
from servelab.core.secretnames import is_plain_header, is_secret_key, is_secret_name

__all__ = [
    "LONGEST_QUOTED",
    "MIN_REDACTED_CHARS",
    "REDACTED",
    "argument_secrets",
    "clip_long",
    "mask",
    "mask_fields",
    "redact",
    "redact_headers",
    "redact_url",
    "redact_words",
    "secret_values",
    "stored_url",
]

#: What a secret is replaced by.
REDACTED = "***"
#: The shortest value replaced by its text.
MIN_REDACTED_CHARS = 6

#: ``--flag VALUE`` or ``--flag=VALUE`` (the value is not another flag).
_FLAG = re.compile(r"(?P<flag>(?<![\w-])--?[^\W\d_][\w-]*)(?P<sep>=|[ \t]+)(?P<value>(?!--)\S+)")
#: One character of a key written as a JSON or Python escape (``\\u0077``, ``\\x77``).
_ESCAPED = r"\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}"
#: A key's other characters: a word's, ``.`` and ``-``, and what a key may hide in it (zero-width
#: characters, the soft hyphen, combining marks, variation selectors).
_KEY_CHAR = r"[\w.\u00ad\u0300-\u036f\u034f\u200b-\u200d\u2060\ufe00-\ufe0f\ufeff-]"
#: What a key never starts after: a word's character, an escape's backslash, a hidden one.
_INSIDE = r"[\w\\\u00ad\u0300-\u036f\u034f\u200b-\u200d\u2060\ufe00-\ufe0f\ufeff-]"
#: What may stand around a key's ``:`` or ``=``: blanks, any Unicode space (a no-break space),
#: a carriage return, a zero-width character; never a line's end.
_GAP = r"[^\S\n]"
#: ``name: value`` / ``name=value`` / ``"name": "value"`` / ``name<TAB>value`` up to the end of
#: the line (a quoted value up to its closing quote). A key never starts inside a word or an
#: escape (``\\u0077``'s ``u``): one try per word, not one per character of a long run.
_KEYED = re.compile(
    rf"""(?P<key>(?<!{_INSIDE})["']?(?:[^\W\d_]|{_ESCAPED})(?:{_KEY_CHAR}|{_ESCAPED})*["']?)"""
    rf"""(?P<sep>{_GAP}*(?:->|=+>|[:=]){_GAP}*|\t+)"""
    r"""(?P<value>"(?:[^"\\\n]|\\.)*"?|'(?:[^'\n]|'')*'?|[^\s,;{}\['"][^\n,;}]*)"""
)
#: What ends a secret's unquoted value at a ``,`` or ``;``: another key follows (``;Server=h``,
#: ``, #cached-token: 0``, ``, token usage: 0.1``); else the separator is part of the value
#: (``PASSWORD=ab,cd``, ``password=x;tail``) and it is masked to the end of the line.
_NEXT_KEY = re.compile(
    r"""[,;][ \t]*[#"']?(?:[A-Za-z][\w.-]*[ ]){0,2}[A-Za-z][\w.-]*["']?[ \t]*[:=]"""
)
#: A YAML block scalar (``api_key: |``, ``password: >-``): its more-indented lines are its value.
_BLOCK = re.compile(
    r"""(?m)^(?P<head>(?P<indent>[ \t]*)(?:-[ \t]+)?(?P<key>["']?[A-Za-z][\w.-]*["']?)"""
    r"""[^\S\n]*:[^\S\n]*)[|>][0-9+-]{0,2}[^\S\n]*(?:\#[^\n]*)?$"""
    r"""(?:\n(?:[ \t]*(?=\n|\Z)|(?P=indent)[ \t]+[^\n]*))*"""
)
#: A quoted key inside an ordinary key's value (JSON on one line: ``"https://h/": {"auth": ...``).
_QUOTED_KEYED = re.compile(
    rf"""(?P<key>"(?:{_KEY_CHAR}|{_ESCAPED})+"|'(?:{_KEY_CHAR}|{_ESCAPED})+')"""
    r"""(?P<sep>[ \t]*:[ \t]*)"""
    r"""(?P<value>"[^"\n]*"?|'[^'\n]*'?|[^\s,;{}\['"][^\n,;}]*)"""
)


#: A URL's scheme, at most 32 characters back from its ``://`` (never the whole run of scheme
#: characters before it: ``mysql -p-p-p…`` made every one of its letters scan to the end of the
#: run, quadratic; a longer scheme is matched from within, the password masked all the same).
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]{0,31}"
#: The longest password a URL's user information is read to (unbounded, ``a://x:b`` repeated
#: with no ``@`` had every ``a`` scan to the end of the text, quadratic); a longer one is not
#: masked by these rules (a log tail quoted is 1,500 bytes).
_PASSWORD_MAX = 4096
#: A URL's user information with a password: ``scheme://user:`` then the password, up to the
#: last ``@`` before the path (a raw ``@`` in a password: a URL parser splits at the last one).
_USERINFO = re.compile(rf"(?P<head>{_SCHEME}://[^\s:/@]*:)[^\s/]{{1,{_PASSWORD_MAX}}}@")
#: A password with a raw ``/`` (``http://u:pa/ss@host``, not a valid URL but typed so): what
#: follows ``user:`` is not a port (digits, then the path), up to the last ``@`` of the word.
_USERINFO_SLASH = re.compile(
    rf"(?P<head>{_SCHEME}://[^\s:/@]*:)(?!\d+(?:[/?#\s]|$))[^\s@]{{1,{_PASSWORD_MAX}}}@"
)
#: A private key's PEM block, whole (to its END line, or to the end of the text when cut); a PGP
#: ``PRIVATE KEY BLOCK`` too.
_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)
#: A webhook URL whose path is the secret (Slack's ``hooks.slack.com/services/T../B../...``).
_HOOK = re.compile(r"(?P<head>hooks\.slack\.com/(?:services|workflows|triggers)/)\S+")
#: A URL whose user is a key (a Sentry DSN ``https://KEY@o1.ingest.sentry.io/1``): a user of 16
#: or more letters and digits, no password.
_USER_KEY = re.compile(rf"(?P<head>{_SCHEME}://)[A-Za-z0-9_-]{{16,}}@")
#: A bearer token wherever it stands (``Bearer X`` without ``Authorization:`` before it).
_BEARER = re.compile(r"(?P<head>(?<![\w-])(?i:bearer)[ \t]+)(?!\*\*\*)[A-Za-z0-9._~+/=-]{6,}")
#: A URL's query or fragment parameter (``?token=...``, ``&api_key=...``, ``#access_token=``).
#: Its name may be percent-encoded (``?api%5Fkey=``): it is decoded to be read.
_QUERY = re.compile(
    r"(?P<head>[?&;#](?P<key>(?:[^\W\d_]|%[0-9A-Fa-f]{2})[\w.%-]*)=)(?P<value>[^&#\s]+)"
)


def _flag_name(word: str) -> str | None:
    if not word.startswith("-") or word.startswith("---"):
        return None
    return word.lstrip("-").split("=", 1)[0]


def argument_secrets(words: Iterable[str]) -> list[str]:
    """The values that follow a secret-looking flag in ``words`` (``--api-key X``,
    ``--token=X``)."""
    found: list[str] = []
    expecting = False
    for word in words:
        name = _flag_name(word)
        if expecting and name is None:
            found.append(word.strip("\"'"))
        expecting = False
        if name is not None and is_secret_name(name):
            if "=" in word:
                found.append(word.split("=", 1)[1].strip("\"'"))
            else:
                expecting = True
    return found


def secret_values(values: Iterable[str]) -> list[str]:
    """Every one of ``values`` (a service's env values), and the argument values after
    secret-looking flags among their words (an ``args_env`` variable's ``--api-key X``)."""
    found: list[str] = []
    for value in values:
        found.append(value)
        found.extend(argument_secrets(value.split()))
    return found


def _longest_first(values: Iterable[str]) -> list[str]:
    """The values to replace, longest first (a value that holds another is replaced whole)."""
    kept = {value for value in values if len(value) >= MIN_REDACTED_CHARS}
    return sorted(kept, key=len, reverse=True)


def _flag(match: re.Match[str]) -> str:
    """A secret flag's value masked; a word of prose after it is none (``--password via``)."""
    if not is_secret_name(match.group("flag")) or match.group("value") in PROSE_WORDS:
        return match.group(0)
    return f"{match.group('flag')}{match.group('sep')}{REDACTED}"


#: How deep an ordinary key's value is searched for keys again: a secret key after up to 24
#: others on a line is found (logfmt); a bound on hostile lines (1 MB of ``a=b``: 0.74 s CPU).
_KEYED_DEPTH = 24
_AFTER_WORD = re.compile(r"(?P<word>\S+\s+)(?P<rest>\S.*)", re.S)  # a first word, the rest


def _secret_keyed(match: re.Match[str]) -> bool:
    """A secret-looking key's value, but not a path's last name before ``: `` and a blank (a file
    and what went wrong: ``/etc/passwd: not a usable ledger``); ``a/password=X`` is masked."""
    sep, at = match.group("sep"), match.start()
    path = at > 0 and match.string[at - 1] == "/" and sep.strip() == ":" and sep[-1].isspace()
    return is_secret_key(match.group("key")) and not path


def _keyed(match: re.Match[str], depth: int = 0) -> str:
    key, sep, value = match.group("key"), match.group("sep"), match.group("value")
    if (secret := _secret_keyed(match)) or depth >= _KEYED_DEPTH:
        return f"{key}{sep}{REDACTED}" if secret else match.group(0)
    # an ordinary key's unquoted value runs to the end of the line: a quoted secret key in it
    # (``"https://host/": {"auth": "..."}``) is found there, and a secret key (logfmt, libpq:
    # ``user=u password=...``; ``foo: token=X``), past a first word that is a URL (its own
    # parameters are the URL rule's)
    after = _AFTER_WORD.match(value)
    first = value.split(None, 1)[0]
    whole = ">" in sep or is_secret_key(key) or not ("://" in first or first.startswith("//"))
    if whole and not value.startswith(("'", '"')):  # ``a->b = X``, ``/etc/passwd: x``: all of it
        value = _KEYED.sub(lambda m: _keyed(m, depth + 1), value)
    elif after is not None and not value.startswith(("'", '"')):
        value = after["word"] + _KEYED.sub(lambda m: _keyed(m, depth + 1), after["rest"])
    return f"{key}{sep}{_QUOTED_KEYED.sub(lambda m: _keyed(m, depth + 1), value)}"


def redact(text: str, values: Iterable[str] = ()) -> str:
    """``text`` with every one of ``values`` and of their secret argument values
    (:func:`secret_values`, at least :data:`MIN_REDACTED_CHARS` long), every value after a
    secret-looking flag, every value of a secret-looking key or URL query parameter, every
    password of a URL (``http://user:PASSWORD@host``) and every token of a well-known shape
    (``sk-...``, ``hf_...``) replaced by :data:`REDACTED`."""
    secrets = _longest_first(secret_values(values))

    def replaced(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text

    def holds(word: str) -> bool:  # a decoded word: what one word of a URL can hold
        said = _keyed_values(_FLAG.sub(_flag, _QUERY.sub(_query, replaced(word))))
        return _BEARER.sub(REDACTED, SHAPED.sub(REDACTED, redact_url(said))) != word

    # a percent-encoded word is masked when its decoded form holds a secret (``sk%2D...``)
    return mask_encoded(_masked(replaced(text)), REDACTED, holds)


def _masked(text: str) -> str:
    """:func:`redact` but for the values it is given and the percent-encoded words."""
    text = redact_url(text)
    text = _PEM.sub(REDACTED, text)
    text = _HOOK.sub(rf"\g<head>{REDACTED}", text)
    text = SHAPED.sub(REDACTED, text)
    text = _BEARER.sub(rf"\g<head>{REDACTED}", text)
    text = mask_prose(text, REDACTED, MIN_REDACTED_CHARS)
    text = _QUERY.sub(_query, text)
    text = mask_credentials(text, REDACTED)
    text = mask_listed(text, REDACTED, is_secret_name)
    text = mask_pairs(text, REDACTED, is_secret_key)
    text = _FLAG.sub(_flag, text)
    text = _BLOCK.sub(_block, text)
    return _keyed_values(text)


def _block(match: re.Match[str]) -> str:
    """A secret key's block scalar masked: its lines indented past the key's column."""
    if not is_secret_name(match.group("key")):
        return match.group(0)
    column = match.start("key") - match.start()
    lines = match.group(0).split("\n")
    kept = 1
    while kept < len(lines) and (
        not lines[kept].strip() or len(lines[kept]) - len(lines[kept].lstrip()) > column
    ):
        kept += 1
    return "\n".join([f"{match.group('head')}{REDACTED}", *lines[kept:]])


def _keyed_values(text: str) -> str:
    """:data:`_KEYED`'s substitution, where a secret's unquoted value runs on past a ``,`` or
    ``;`` that no other key follows (:data:`_NEXT_KEY`) to the end of its line."""
    out: list[str] = []
    pos = 0
    for match in _KEYED.finditer(text):
        if match.start() < pos:
            continue
        out.append(text[pos : match.start()])
        out.append(_keyed(match))
        pos = match.end()
        if _secret_keyed(match) and match.group("value")[:1] not in "\"'":
            pos = _line_end(text, pos) if _whole_line(match["key"]) else _value_end(text, pos)
    out.append(text[pos:])
    return "".join(out)


#: Headers whose value is a credential up to the end of its line, however many ``,`` parts it
#: has (``Authorization: Digest username="u", response="..."``).
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})


def _whole_line(key: str) -> bool:
    return key.strip("\"' ").lower() in _CREDENTIAL_HEADERS


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


_VALUE_STOP = re.compile(r"[\n,;}]")


def _value_end(text: str, pos: int) -> int:
    """Where an unquoted value that stopped at ``pos`` ends: past each ``,``/``;`` no key
    follows, up to the end of the line or a ``}``."""
    while pos < len(text) and text[pos] in ",;" and _NEXT_KEY.match(text, pos) is None:
        stop = _VALUE_STOP.search(text, pos + 1)
        pos = len(text) if stop is None else stop.start()
    return pos


#: The most characters of one value an error line quotes (a longer one is cut, ``…`` after it).
LONGEST_QUOTED = 200


def clip_long(text: str, limit: int = LONGEST_QUOTED) -> str:
    """``text`` with every run of more than ``limit`` non-blank characters (a value typed whole
    into an option, 5,000 characters of it) cut to its first ``limit``, then ``…``."""
    return re.sub(rf"\S{{{limit + 1},}}", lambda m: m.group(0)[:limit] + "…", text)


def _query(match: re.Match[str]) -> str:
    if not is_secret_name(unquote(match.group("key"))):
        return match.group(0)
    return f"{match.group('head')}{REDACTED}"


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it (``scheme://user:PASSWORD@``) replaced by
    :data:`REDACTED`; the user name and the rest stay (what is stored and shown of ``--url``)."""
    if "://" not in text or "@" not in text:  # no URL with user information: nothing to scan
        return text
    text = _USERINFO.sub(rf"\g<head>{REDACTED}@", text)
    text = _USER_KEY.sub(rf"\g<head>{REDACTED}@", text)
    return _USERINFO_SLASH.sub(rf"\g<head>{REDACTED}@", text)


def redact_headers(headers: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """``headers`` with the value of every header but the standard plain ones replaced
    (:func:`~servelab.core.secretnames.is_plain_header`: a vendor's header name says nothing of
    its value), and what :func:`redact` finds in a plain one's (a token's shape): what is stored
    and shown of ``--header``; the requests carry the real values."""
    return tuple(
        (name, redact(value) if is_plain_header(name) else REDACTED) for name, value in headers
    )


def redact_words(words: Iterable[str]) -> list[str]:
    """A command line with the value after every secret-looking flag replaced (``--api-key X``,
    ``--token=X``); the other words as they are."""
    out: list[str] = []
    expecting = False
    for word in words:
        name = _flag_name(word)
        if expecting and name is None:
            out.append(REDACTED)
        elif name is not None and is_secret_name(name) and "=" in word:
            out.append(f"{word.split('=', 1)[0]}={REDACTED}")
        else:
            out.append(word)
        expecting = name is not None and is_secret_name(name) and "=" not in word
    return out


def stored_url(url: str) -> str:
    """A URL as a contract stores and shows it (``--url``: ``StoredUrl``, in
    :mod:`servelab.core.redacted`): its password and its secret-named query parameters masked;
    the requests use the real one."""
    url = SHAPED.sub(REDACTED, _QUERY.sub(_query, redact_url(url)))
    return mask_encoded(url, REDACTED, lambda word: redact(word) != word)


def mask(name: str, value: str | None) -> str | None:
    """A knob's ``value`` as shown and stored: :data:`REDACTED` when ``name`` is secret-looking
    (``ROUTER_API_KEY``, ``--hf-token``: :func:`is_secret_name`), else the value with what
    :func:`redact` finds in it masked (a secret-shaped value of an ordinary name: ``sk-...``,
    ``hf_...``, a URL's password); None (unset) stays None."""
    if value is None:
        return None
    return REDACTED if is_secret_name(name) else redact(value)


def _masked_value(value: Any, whole: bool) -> Any:
    if not isinstance(value, str):
        return value
    return REDACTED if whole else redact(value)


def _masked_item(item: Any, whole: bool) -> Any:
    """One item of a list of values: a ``[place, value]`` pair or a ``{"value": ...}`` record."""
    if isinstance(item, list | tuple) and len(item) == 2:
        return [item[0], _masked_value(item[1], whole)]
    if isinstance(item, dict) and item.get("value") is not None:
        return item | {"value": _masked_value(item["value"], whole)}
    return item


def mask_fields(data: Any, name: str, fields: Iterable[str]) -> Any:
    """The encoding ``data`` of a record about the knob ``name`` with its value ``fields`` masked
    (a string, or a list of ``[place, value]`` pairs or ``{"value": ...}`` records): whole for a
    secret-looking name, else what :func:`redact` finds in them (:func:`mask`)."""
    if not isinstance(data, dict):
        return data
    whole = is_secret_name(name)
    out = dict(data)
    for field in fields:
        value = out.get(field)
        if isinstance(value, str):
            out[field] = _masked_value(value, whole)
        elif isinstance(value, list | tuple):
            out[field] = [_masked_item(item, whole) for item in value]
    return out
