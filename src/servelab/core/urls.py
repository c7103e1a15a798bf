"""A URL a user typed, parsed once (pure): every option and spec field that takes a server's URL
(``--url``, ``init --router``, ``soak --router-url``/``--router-metrics-url``, a spec's
``services.*.url`` and ``[prometheus] url``) reads it here.

What is taken: ``http://`` or ``https://`` (either case), then a host (a name, an IPv4 address,
or an IPv6 address in brackets: ``[::1]``), an optional port from 1 to 65535, an optional path.
What is refused, each with its own reason (a :class:`~servelab.errors.UrlError`): another scheme
(``ftp://``), no scheme (``localhost:8000``, ``garbage``), a bracket left open (``http://[::1``),
a port out of range (``:0``, ``:99999``) or empty (``http://h:``), a space or a control character
anywhere, a non-ASCII host, and a query or a fragment (servelab appends its own paths to these
URLs: ``http://h:1/?x=1`` would become ``http://h:1/?x=1/v1/models``). A user and password
(``http://user:pw@h:1``) are kept, as they were (the request sends them as Basic auth); every
error quotes the text with its password masked (:func:`~servelab.core.redaction.redact_url`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from servelab.core.redaction import REDACTED, redact, redact_url
from servelab.errors import OptionError, UrlError

__all__ = [
    "MAX_HOST_CHARS",
    "MAX_URL_CHARS",
    "SCHEMES",
    "URL_FORM",
    "HttpUrl",
    "authorized_twice",
    "parse_http_url",
    "parse_url",
    "shown_url",
]

#: The schemes a server's URL may have.
SCHEMES = ("http", "https")
#: The form a server's URL takes, as errors say it.
URL_FORM = "http://HOST[:PORT][/PATH]"
#: The longest URL taken (a browser's practical limit; a server's base URL is far shorter).
MAX_URL_CHARS = 2048
#: The longest host name (DNS's).
MAX_HOST_CHARS = 253
#: The longest text an error quotes whole (a longer one is cut, its length said).
_QUOTED = 120
#: A host name's characters (a DNS name, a container's name with ``_``).
_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class HttpUrl:
    """A parsed URL: ``scheme`` in lower case, ``host`` without brackets (``::1``), ``port`` None
    when not given (the scheme's own), ``path`` as typed (``""`` or starting with ``/``)."""

    scheme: str
    host: str
    port: int | None
    path: str
    user: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def netloc(self) -> str:
        """``host[:port]``, an IPv6 host in brackets (without the user)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def shown(self) -> str:
        """The URL with its password masked: what may be printed or stored."""
        return self._text(REDACTED if self.password is not None else None)

    def __str__(self) -> str:
        """The URL whole (its password too: what a request is sent to)."""
        return self._text(self.password)

    def _text(self, password: str | None) -> str:
        user = "" if self.user is None else self.user
        if password is not None:
            user += f":{password}"
        at = f"{user}@" if self.user is not None else ""
        return f"{self.scheme}://{at}{self.netloc}{self.path}"


def _userinfo_masked(text: str) -> str:
    """``text`` with all between the first ``:`` after its scheme and its last ``@`` masked: a
    password, however broken the URL around it (a space in it, junk before the scheme), is
    never quoted; an ``@`` in a path masks more than needed, never less."""
    start = text.find("://")
    start = 0 if start < 0 else start + 3
    colon, at = text.find(":", start), text.rfind("@")
    return text if not 0 <= colon < at else f"{text[: colon + 1]}{REDACTED}{text[at:]}"


def shown_url(text: str) -> str:
    """``text`` as an error quotes it: its password (and any secret shape) masked, quoted, cut to
    its first :data:`_QUOTED` characters."""
    masked = redact(redact_url(_userinfo_masked(text)))
    if len(masked) <= _QUOTED:
        return repr(masked)
    return f"{masked[:_QUOTED]!r}… ({len(text):,} characters)"


def _refused(text: str, why: str) -> UrlError:
    return UrlError(f"expected an http:// or https:// URL ({why}), got {shown_url(text)}", why)


def parse_http_url(text: str, *, port_required: bool = False) -> HttpUrl:
    """``text`` as an :class:`HttpUrl`, else a :class:`~servelab.errors.UrlError` saying why
    (``port_required``: a service's URL, whose port servelab checks and frees)."""
    if not text.strip():
        raise UrlError(f"expected an http:// or https:// URL ({URL_FORM}), got an empty value",
                       "empty")  # fmt: skip
    if len(text) > MAX_URL_CHARS:
        raise _refused(text, f"at most {MAX_URL_CHARS:,} characters")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise _refused(text, "no space or control character in it")
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise _refused(text, URL_FORM)
    if scheme.lower() not in SCHEMES:
        raise _refused(text, f"{URL_FORM}, not {scheme[:16]}://")
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "?" in tail or "#" in tail:
        raise _refused(text, "no query (?) or fragment (#): servelab appends its own paths")
    userinfo, at, hostport = authority.rpartition("@")
    if "[" in userinfo or "]" in userinfo:
        raise _refused(text, "no '[' or ']' in a user or password: percent-encode them")
    user, colon, password = userinfo.partition(":")
    host, port = _host_port(text, hostport)
    if port is None and port_required:
        raise _refused(text, "an explicit port, from 1 to 65535")
    return HttpUrl(scheme.lower(), host, port, tail, user if at else None,
                   password if colon else None)  # fmt: skip


def _host_port(text: str, hostport: str) -> tuple[str, int | None]:
    """The host (IPv6 unbracketed) and the port of ``host[:port]``."""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise _refused(text, "the IPv6 address's bracket is never closed: http://[::1]:PORT")
        host, after = hostport[1:close], hostport[close + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _refused(text, "an IPv6 address between the brackets") from None
        if "%" in host:
            raise _refused(text, "an IPv6 address without a zone (%)")
        if after and not after.startswith(":"):
            raise _refused(text, "only :PORT after the IPv6 address's bracket")
        return host, _port(text, after[1:]) if after else None
    host, colon, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    if ":" in host:
        raise _refused(text, "an IPv6 address in brackets: http://[::1]:PORT")
    if not host:
        raise _refused(text, f"{URL_FORM}, with a host")
    if not _NAME.fullmatch(host) or len(host) > MAX_HOST_CHARS:
        raise _refused(text, "a host of ASCII letters, digits, '.', '-', '_' (an international "
                       f"name in its xn-- form), at most {MAX_HOST_CHARS} of them")  # fmt: skip
    return host, _port(text, port) if colon else None


def _port(text: str, port: str) -> int:
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or not 0 < int(port) < 65536:
        raise _refused(text, "a port from 1 to 65535")
    return int(port)


def parse_url(text: str) -> str:
    """A server's ``http://`` or ``https://`` URL, as :func:`parse_http_url`
    takes it (a host, a port from 1 to 65535, no query), returned as given; the error quotes it
    with its password masked."""
    try:
        parse_http_url(text)
    except UrlError as exc:
        raise OptionError(str(exc)) from None
    return text


def authorized_twice(url: str, headers: Iterable[tuple[str, str]]) -> bool:
    """``url`` carries a user's credentials (``user:password@``, or a user alone) and
    ``headers`` an ``Authorization`` header too: a request carries one Authorization, and
    which one a client sends is not the user's to guess (aiohttp refuses the pair)."""
    netloc = urlsplit(url).netloc
    return "@" in netloc and any(name.strip().lower() == "authorization" for name, _ in headers)
