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
- a password option with a space before its value (what ``sh -x`` prints of a start script):
  ``-p X`` after a client that reads a password so (a ``login`` command: ``docker login``,
  ``helm registry login``, ``az login``, ``oc login``; ``mysql``, ``mongosh``), ``-a X`` after
  ``redis-cli``, ``-P X`` after ``mosquitto_pub``; and ``-p X`` elsewhere when X is shaped like
  a secret (:func:`~servelab.core.prosesecret.shaped`) with a digit (``systemctl show -p
  NeedDaemonReload`` stays), and not a number, a port (``ssh -p 22``, ``docker run -p
  8080:80``), a path or a file's name;
- ``htpasswd -b [FILE] USER PASSWORD`` (the password is the last of its words);
- the password of ``user:password@host`` without a scheme (``git clone bob:X@host``); an image's
  ``name:tag@sha256:...``, a time ``10:30@office`` and ``mailto:bob@host`` are not credentials;
- tokens of well-known shapes (:data:`SHAPED`: ``sk-...``, ``hf_...``, ``ghp_...``, a JWT...),
  which the policy masks wherever they stand.
"""

from __future__ import annotations

import base64
import re

from servelab.core.prosesecret import shaped

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


#: A password option and its value after a space (``-p X``, ``-p 'X'``, ``-a X``, ``-P X``).
_SPACED = re.compile(
    r"""(?P<head>(?<![\w-])-(?P<flag>[paP])[ \t]+(?P<q>["'])?)"""
    r"""(?P<value>(?(q)[^'"\n]+(?=(?P=q))|[^\s'"-][^\s'"]*))"""
)
#: The clients whose spaced option reads a password, by option (looked for before it on its line).
_SPACED_CLIENTS = {
    "p": re.compile(
        r"(?<![\w-])(?:login|mysql\w*|mariadb\w*|sshpass|mongo(?:sh|dump|restore)?)(?![\w-])"
    ),
    "a": re.compile(r"(?<![\w-])(?:redis|valkey|keydb)-cli(?![\w-])"),
    "P": re.compile(r"(?<![\w-])mosquitto_(?:pub|sub|rr)(?![\w-])"),
}
#: A ``-p`` value that is no password: a path, a file's name (``model2.bin``), a port or ports.
_NOT_A_SPACED_PASSWORD = re.compile(r"[/.~$].*|.*/.*|.*\.[A-Za-z]{1,5}|[\d.:-]+(?:/\w+)?")
#: ``htpasswd`` and the words after it on its line (``-b`` takes the password as the last word).
_HTPASSWD = re.compile(r"(?<![\w-])htpasswd(?P<rest>[ \t]+[^\n]*)")
#: ``user:password@host`` without a scheme; the host may have a port, never another ``:``
#: (an image's ``nginx:1.25@sha256:0123...``) or ``@``.
_BARE_USERINFO = re.compile(
    r"(?<![\w.%+:/@-])(?P<user>[A-Za-z0-9._%+-]{1,64}):(?P<value>[^\s:/@'\"]{1,256})@"
    r"(?=[A-Za-z0-9][A-Za-z0-9.-]*(?::\d+)?(?:[^\w.:@-]|\Z))"
)
#: Schemes written ``scheme:user@host`` (no ``//``): what follows the ``:`` is a user.
_USER_SCHEMES = frozenset({"mailto", "sip", "sips", "xmpp", "im", "pres"})


def mask_credentials(text: str, mask: str) -> str:
    """``text`` with every credential of the module doc replaced by ``mask``."""
    text = _BASIC.sub(lambda m: _basic(m, mask), text)
    text = _GLUED_P.sub(lambda m: _glued_p(m, mask), text)
    if "sshpass" in text:  # a plain search first: the pattern is slow to try everywhere
        text = _SSHPASS_P.sub(rf"\g<head>{mask}", text)
    text = _SPACED.sub(lambda m: _spaced(m, mask), text)
    if "htpasswd" in text:
        text = _HTPASSWD.sub(lambda m: _htpasswd(m, mask), text)
    text = _BARE_USERINFO.sub(lambda m: _bare_userinfo(m, mask), text)
    return _USER_PASS.sub(lambda m: _user_pass(m, mask), text)


def _line_before(match: re.Match[str]) -> str:
    """The text of ``match``'s line before it (at most :data:`_CLIENT_REACH` characters)."""
    text, start = match.string, match.start()
    since = max(0, start - _CLIENT_REACH)
    return text[max(since, text.rfind("\n", since, start) + 1) : start]


def _spaced(match: re.Match[str], mask: str) -> str:
    value, flag = match.group("value"), match.group("flag")
    if value.isdigit() or value == mask:
        return match.group(0)  # a port (``ssh -p 22``, ``redis-cli -p 6379``)
    client = _SPACED_CLIENTS[flag].search(_line_before(match)) is not None
    generic = (
        flag == "p"
        and any(c.isdigit() for c in value)  # ``systemctl show -p NeedDaemonReload``: a name
        and _NOT_A_SPACED_PASSWORD.fullmatch(value) is None
        and shaped(value, 6)
    )
    return f"{match.group('head')}{mask}" if client or generic else match.group(0)


def _htpasswd(match: re.Match[str], mask: str) -> str:
    rest = match.group("rest")
    words = list(re.finditer(r"\S+", rest))
    options = "".join(w.group(0) for w in words if w.group(0).startswith("-"))
    plain = [w for w in words if not w.group(0).startswith("-")]
    needed = 2 if "n" in options else 3
    if "b" not in options or len(plain) < needed:
        return match.group(0)
    word = plain[needed - 1]
    rest = f"{rest[: word.start()]}{mask}{rest[word.end() :]}"
    return f"htpasswd{rest}"


def _bare_userinfo(match: re.Match[str], mask: str) -> str:
    user, value = match.group("user"), match.group("value")
    if user.lower() in _USER_SCHEMES or (user.isdigit() and value.isdigit()) or value == mask:
        return match.group(0)
    return f"{user}:{mask}@"


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
