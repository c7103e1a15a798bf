"""Credentials in command text, as typed to a client (part of the one redaction policy,
:mod:`servelab.core.redaction`, which calls :func:`mask_credentials`):

- a ``Basic`` credential (``Authorization: Basic dXNlcjpwdw==``, or the word alone before one),
  when what follows reads as base64 of ``user:password`` or is token-like: ``Basic auth is off``
  stays;
- a password glued to ``-p`` (``mysql -uroot -pSECRET``, ``sshpass -pSECRET``): after a client
  that reads it so, always (``mysql -p4242``: 4242 is the password there); elsewhere unless it
  reads as a port (``-p8080``, ``-p127.0.0.1:80:80``), a word of lower-case letters
  (``-pthread``, ``-pix_fmt``) or a cluster of up to three letters (``cp -pR``); ``-p 8080``
  (a space) is never a password;
- the password of ``user:password`` after ``-u``/``--user``/``-U``/``--proxy-user`` (curl, wget),
  the user kept; ``-u 1000:1000`` (a uid:gid) and ``-u http://...`` are not credentials; and
  OpenSSL's ``pass:PASSWORD``;
- ``sshpass -p PASSWORD`` (a space after ``-p``: sshpass reads the next word so);
- tokens of well-known shapes (:data:`SHAPED`: ``sk-...``, ``hf_...``, ``ghp_...``, a JWT...),
  which the policy masks wherever they stand.
"""

from __future__ import annotations

import base64
import re

__all__ = ["SHAPED", "mask_credentials"]

#: Tokens by their well-known shapes, wherever they stand (an OpenAI ``sk-`` key, a Hugging Face
#: ``hf_`` token, GitHub's ``ghp_``..., Slack's ``xox?-``, an AWS access key id).
SHAPED = re.compile(
    r"(?<![\w-])(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|xapp-[A-Za-z0-9-]{10,}|A(?:KIA|SIA|BIA|CCA)[0-9A-Z]{16}"
    r"|ya29\.[A-Za-z0-9_-]{20,}|nvapi-[A-Za-z0-9_-]{20,}|gl(?:pat|rt|dt)-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"
    r"|github_pat_[A-Za-z0-9_]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{10,}|AIza[0-9A-Za-z_-]{30,}"
    r"|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{16,}"
    r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|dapi[0-9a-f]{20,}(?:-\d+)?"
    r"|do[por]_v1_[A-Za-z0-9]{20,}"
    r"|(?:whsec|shpat|shpss|shpca|shppa|gsk|r8|api_org)_[A-Za-z0-9]{20,}"
    r"|xai-[A-Za-z0-9]{20,}|dckr_pat_[A-Za-z0-9_-]{20,}|hvs\.[A-Za-z0-9_-]{20,}"
    r"|GOCSPX-[A-Za-z0-9_-]{20,}|tskey-[A-Za-z0-9-]{20,}|sq0(?:atp|csp)-[A-Za-z0-9_-]{20,}"
    r"|AGE-SECRET-KEY-1[0-9A-Z]{20,})"
)

#: A ``Basic`` credential (``Authorization: Basic dXNlcjpwdw==`` or the word alone before one):
#: what follows is masked when it reads as base64 of ``user:password`` or is token-like
#: (:func:`_credential_like`), so ``Basic auth is off`` stays.
_BASIC = re.compile(
    r"(?P<head>(?<![\w-])(?i:basic)[ \t]+)(?P<value>[A-Za-z0-9+/]{4,}={0,2})(?![\w+/=.-])"
)
#: A password glued to ``-p`` (``mysql -uroot -pSECRET``): masked after a client that reads it so
#: (:data:`_P_CLIENTS`), else unless it reads as a port (``-p8080``, ``-p127.0.0.1:80:80``) or a
#: word of lower-case letters (``-pthread``, ``-pix_fmt``) or a cluster of three letters (``-pR``).
_GLUED_P = re.compile(r"(?P<head>(?<![\w-])-p)(?P<value>[^\s'\"]+)")
#: How far before a ``-p`` its client's name is looked for (a bound on hostile lines).
_CLIENT_REACH = 256
_P_CLIENTS = re.compile(r"(?<![\w-])(?:mysql\w*|mariadb\w*|sshpass|mysqlsh)(?![\w-])")
_NOT_A_PASSWORD = re.compile(r"[\d.:/-]+(?:/(?:tcp|udp|sctp))?|[a-z_-]+|[A-Za-z]{1,3}")
#: ``user:password`` after ``-u``/``--user`` (curl, wget) or ``--proxy-user``/``-U``, and
#: OpenSSL's ``pass:PASSWORD``: the password is masked, the user stays; ``-u 1000:1000`` (a
#: uid:gid) and ``-u http://...`` are not credentials.
_USER_PASS = re.compile(
    r"""(?P<head>(?<![\w-])(?:-u|-U|--user|--proxy-user)(?:[ \t]+|=)?["']?"""
    r"""(?P<user>[^\s:'"/@]*):)(?P<value>(?!//)[^\s'"]+)"""
    r"""|(?P<pass>(?<![\w-])pass:)(?P<word>[^\s'"]+)"""
)

#: ``sshpass -p PASSWORD``: the word after sshpass's ``-p`` (other options may come before it).
_SSHPASS_P = re.compile(
    r"(?P<head>(?<![\w-])sshpass(?:[ \t]+-[A-Za-oq-z]\S*)*[ \t]+-p[ \t]+)(?P<value>[^\s'\"]+)"
)


def mask_credentials(text: str, mask: str) -> str:
    """``text`` with every credential of the module doc replaced by ``mask``."""
    text = _BASIC.sub(lambda m: _basic(m, mask), text)
    text = _GLUED_P.sub(lambda m: _glued_p(m, mask), text)
    if "sshpass" in text:  # a plain search first: the pattern is slow to try everywhere
        text = _SSHPASS_P.sub(rf"\g<head>{mask}", text)
    return _USER_PASS.sub(lambda m: _user_pass(m, mask), text)


def _credential_like(value: str) -> bool:
    """Whether the word after ``Basic`` is a credential: base64 of ``user:password``, or a
    token (12 characters or more with a digit or ``+/=``), not a word (``auth``)."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:
        decoded = b""
    return b":" in decoded or (len(value) >= 12 and bool(re.search(r"[\d+/=]", value)))


def _basic(match: re.Match[str], mask: str) -> str:
    if not _credential_like(match.group("value")):
        return match.group(0)
    return f"{match.group('head')}{mask}"


def _glued_p(match: re.Match[str], mask: str) -> str:
    text, start = match.string, match.start()
    since = max(0, start - _CLIENT_REACH)
    line = text[max(since, text.rfind("\n", since, start) + 1) : start]
    if _P_CLIENTS.search(line) is None and _NOT_A_PASSWORD.fullmatch(match.group("value")):
        return match.group(0)
    return f"{match.group('head')}{mask}"


def _user_pass(match: re.Match[str], mask: str) -> str:
    if match.group("pass") is not None:
        return f"{match.group('pass')}{mask}"
    if (match.group("user") or "x").isdigit() and match.group("value").isdigit():
        return match.group(0)  # a uid:gid
    return f"{match.group('head')}{mask}"
