"""Which names say their value is a secret (pure): the name half of the one redaction policy
(:mod:`servelab.core.redaction` masks the values).

A name is secret-looking when one of its words (split at ``-``, ``_`` and case changes) is
``token``, ``secret``, ``password``, ``passwd``, ``pass``, ``credential(s)``, ``auth``,
``authorization``, ``cookie``, ``key``, ``apikey``, ``private`` or ``signature``; when it holds
``password``, ``passphrase``, ``secret``, ``privatekey``... written as one word (``PGPASSWORD``,
``DJANGO_SECRETKEY``); or when a word ends in ``token``, ``key``, ``pass``, ``pwd`` or ``auth``
(``HFTOKEN``, ``NGROK_AUTHTOKEN``, ``--adminkey``) (:func:`is_secret_name`).

A name is read as a reader reads it (:func:`~servelab.core.confusables.fold`: homoglyphs, full-width
and small-capital letters, zero-width characters, soft hyphens and combining marks), and a JSON
escape in it is read first (``"pass\\u0077ord"`` is ``password``).

A request header is secret-looking by that rule, or when one of its words is ``session``,
``access``, ``csrf``, ``xsrf``, ``sid``, ``bypass``, ``cert``, ``certificate``,
``authentication``, ``authn`` or ``authz`` (``X-Session-Id``, ``X-Access``,
``X-Vercel-Protection-Bypass``, ``X-Client-Cert``, ``X-Authentication``: a header carries a
session's, an access grant's, a protection bypass's, a client certificate's or an
authentication's value; as an env variable, a flag or a YAML key ``session_id``, ``--bypass`` and
``cert_path`` are ordinary names; CORS's ``Access-Control-*`` headers are ordinary)
(:func:`is_secret_header`). A key in free text (a log tail, an error message) is read as a
header when it is written as one: it starts with ``X-``, or it is capitalised words joined by
``-`` (``Session-Id: ...``, ``Cf-Access-Jwt-Assertion: ...``); ``session_id: 4`` and
``access-log: true`` are not (:func:`is_secret_key`). A header a user sends (``bench``/``soak
--header``) is judged the other way round: its value is a secret unless its name is one of the
standard headers that carry none (``Accept``, ``Content-Type``, ``User-Agent``, ...:
:func:`is_plain_header`), since no list of names finds every vendor's (``X-Honeycomb-Team``,
``Pwd``, ``X-Psk``).
"""

from __future__ import annotations

import re

from servelab.core.confusables import fold

__all__ = ["is_plain_header", "is_secret_header", "is_secret_key", "is_secret_name"]

_SECRET_WORDS = frozenset(
    {"token", "secret", "secrets", "password", "passwd", "pwd", "credential", "credentials",
     "auth", "authorization", "cookie", "key", "apikey", "private", "bearer", "pass",
     "signature", "sig", "dsn", "webhook", "pw", "passcode", "creds", "pswd", "psw"}
)  # fmt: skip
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
#: Parts of a name written as one word (``PGPASSWORD``, ``DJANGO_SECRETKEY``) that say secret
#: wherever they stand in it.
_SECRET_PARTS = ("password", "passwd", "passphrase", "secret", "credential", "privatekey",
                 "apikey", "accesskey", "serviceaccount", "connectionstring",
                 "webhook", "passcode")  # fmt: skip
#: Endings of a name written as one word that say secret (``HFTOKEN``, ``NGROK_AUTHTOKEN``,
#: ``--adminkey``, ``REDIS_PASS``); ``max_total_tokens``, ``tokenizer`` and ``bypass`` do not.
_SECRET_ENDINGS = ("token", "key", "pass", "pwd", "pw", "auth")
#: Names that end so and are not secrets.
_ORDINARY = frozenset({"bypass", "hotkey", "monkey", "turkey", "whiskey", "jockey", "hockey"})
#: Whole names that look secret and are not (the shell's working directories).
_ORDINARY_NAMES = frozenset({"pwd", "oldpwd"})
#: A web session's cookie written as one word (``sessionid``, ``JSESSIONID``, ``PHPSESSID``);
#: ``session_id`` (a trace's conversation, an A/B's journal id) is an ordinary name.
_SESSION_COOKIES = ("sessionid", "phpsessid")
#: Words that make a header's value a secret (not an env variable's or a key's).
_HEADER_WORDS = frozenset(
    {"session", "access", "csrf", "xsrf", "sid", "sessid", "bypass", "cert", "certificate",
     "authentication", "authn", "authz"}
)  # fmt: skip
#: A header's name as HTTP writes it (``Session-Id``, ``Cf-Access-Jwt-Assertion``): words of a
#: capital and small letters or digits, joined by ``-``; or any name starting ``X-``.
_HEADER_SHAPE = re.compile(r"(?:[Xx]-[\w-]+|[A-Z][a-z0-9]*(?:-[A-Z][A-Za-z0-9]*)+)\Z")
#: Headers of those words that carry no secret: CORS's (``Access-Control-Allow-Origin``).
_ORDINARY_HEADERS = ("access-control-",)
#: A JSON (or Python) escape of one character in a quoted key: ``\\u0077``, ``\\x77``.
_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})")


def _unescaped(name: str) -> str:
    if "\\" not in name:
        return name
    return _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), name)


def _words(name: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(name.strip("-\"' "))]


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (an env variable, a flag, a header, a YAML key) looks like it holds a
    secret (see the module doc)."""
    name = fold(_unescaped(name))  # a homoglyph (a Cyrillic а), a full-width letter, ...
    if name.strip("-\"' ").lower() in _ORDINARY_NAMES:
        return False
    if name.strip("-\"' ").lower().endswith(_SESSION_COOKIES):
        return True
    words = _words(name)
    if set(words) & _SECRET_WORDS or (len(words) > 1 and words[-1] == "session"):
        return True
    joined = re.sub(r"[^a-z]", "", name.lower())
    if any(part in joined for part in _SECRET_PARTS):
        return True
    return any(word.endswith(_SECRET_ENDINGS) and word not in _ORDINARY for word in words)


def is_secret_header(name: str) -> bool:
    """Whether a request header's value is a secret: :func:`is_secret_name`, or a word of the
    name says a session, an access grant or an authentication (``X-Session-Id``, ``X-Access``,
    ``X-Authentication``); CORS's ``Access-Control-*`` are not."""
    folded = fold(name).strip("\"' ")
    if folded.lower().startswith(_ORDINARY_HEADERS):
        return False
    return is_secret_name(name) or bool(set(_words(folded)) & _HEADER_WORDS)


def is_secret_key(name: str) -> bool:
    """Whether a key in text (``name: value``, ``name=value``) looks secret: :func:`is_secret_name`,
    or for a key written as a header's name (``X-...``, ``Session-Id``: :data:`_HEADER_SHAPE`; a
    log line quoting a request's headers) :func:`is_secret_header`. A lower-case or underscored
    key (``session_id: 4``, ``access-log: true``) is not read as a header."""
    if _HEADER_SHAPE.match(fold(name).strip("\"' ")) is not None:
        return is_secret_header(name)
    return is_secret_name(name)


#: Request headers whose values carry no secret: the standard content-negotiation, caching,
#: client and forwarding headers (RFC 9110, 9111, 7239 and their common ``X-Forwarded-*`` forms).
_PLAIN_HEADERS = frozenset(
    {"accept", "accept-charset", "accept-encoding", "accept-language", "cache-control",
     "content-encoding", "content-language", "content-type", "dnt", "forwarded", "origin",
     "pragma", "prefer", "priority", "referer", "user-agent", "via", "x-forwarded-for",
     "x-forwarded-host", "x-forwarded-port", "x-forwarded-proto", "x-real-ip"}
)  # fmt: skip


def is_plain_header(name: str) -> bool:
    """Whether a header the user sends carries no secret: its name is, letter for letter (ASCII,
    any case), one of the standard headers in :data:`_PLAIN_HEADERS`; any other header's value
    (a tenant, a team key, a password under a vendor's name, a look-alike of a plain name) is
    stored and shown as a secret."""
    return name.isascii() and name.strip().lower() in _PLAIN_HEADERS
