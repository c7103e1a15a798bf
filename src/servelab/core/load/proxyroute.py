"""Which path a request takes to a URL: straight, or through a forward proxy (pure).

Agents reach the router the way their HTTP client decides from its environment: the OpenAI SDK
sends through httpx, which reads ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` and ``NO_PROXY``
(either case, the lower-case name first, as :func:`urllib.request.getproxies` reads them; httpx
0.28 ``_utils.get_environment_proxies``). :func:`route` applies the same rule to a target URL so
``soak``, ``bench`` and ``verify`` take the agents' path:

- ``--no-proxy`` (``bypass``): straight, whatever the environment says;
- ``--proxy URL`` (``flag``): through that proxy, whatever the environment says;
- else the variable of the target's scheme (``HTTP_PROXY`` for ``http://``, ``HTTPS_PROXY`` for
  ``https://``), else ``ALL_PROXY``; unless ``NO_PROXY`` names the host: ``*`` (everything), a
  host or IP (exactly, any port), ``.example.com``/``example.com`` (the domain and its
  subdomains), or a ``scheme://host`` entry. Like httpx, loopback is not bypassed by itself.

A proxy must be ``http://HOST:PORT`` (a bare ``HOST:PORT`` reads as that, as httpx reads it); an
``http://`` target goes in the absolute form, an ``https://`` one through a ``CONNECT`` tunnel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.redacted import StoredUrl
from servelab.core.urls import parse_http_url, shown_url
from servelab.errors import UrlError

__all__ = ["ProxyPath", "ProxyRoute", "RouteSource", "parse_proxy", "route"]


class ProxyPath(StrEnum):
    """Straight to the target, or through a forward proxy."""

    DIRECT = "direct"
    FORWARD = "forward_proxy"


class RouteSource(StrEnum):
    """What decided the path: the command line, the environment, or nothing set."""

    FLAG = "flag"  # --proxy URL
    BYPASS = "bypass"  # --no-proxy
    ENV = "env"  # a *_PROXY variable
    NO_PROXY = "no_proxy"  # a *_PROXY variable, but NO_PROXY names the host
    UNSET = "unset"  # no proxy variable for the target's scheme


@dataclass(frozen=True)
class ProxyRoute:
    """The path to ``target``: ``proxy`` (stored with its password redacted) when forwarded,
    ``variable`` the environment variable that set or bypassed it (``HTTP_PROXY``, ``no_proxy``)."""

    path: ProxyPath = ProxyPath.DIRECT
    source: RouteSource = RouteSource.UNSET
    proxy: Annotated[StoredUrl | None, OMITTED_IF_NONE] = None
    variable: Annotated[str | None, OMITTED_IF_NONE] = None

    @property
    def forwarded(self) -> bool:
        return self.path == ProxyPath.FORWARD


def parse_proxy(url: str) -> str:
    """``url`` as a forward proxy's URL (``HOST:PORT`` reads as ``http://HOST:PORT``); a
    ValueError (a :class:`~servelab.errors.UrlError`) when it is not ``http://HOST[:PORT]``, as
    :func:`~servelab.core.urls.parse_http_url` reads it (a port from 1 to 65535, an IPv6 host in
    brackets), quoting it with its password masked."""
    text = url.strip()
    full = text if "://" in text else f"http://{text}"
    try:
        parsed = parse_http_url(full)
    except UrlError as exc:
        raise UrlError(f"a forward proxy must be http://HOST:PORT ({exc.why}), got "
                       f"{shown_url(url)}", exc.why) from None  # fmt: skip
    if parsed.scheme != "http":
        raise UrlError(f"a forward proxy must be http://HOST:PORT, got {shown_url(url)}")
    if parsed.path not in ("", "/"):
        raise UrlError(f"a forward proxy's URL has no path, got {shown_url(url)}")
    return full.rstrip("/")


def _env(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """The variable ``name`` (lower case first, as urllib reads them) and its value, if set."""
    for key in (name.lower(), name.upper()):
        value = env.get(key, "").strip()
        if value:
            return key, value
    return None


def _bypassed(host: str, scheme: str, entries: str) -> bool:
    """Whether ``NO_PROXY``'s ``entries`` name ``host`` (httpx's matching, any port)."""
    host = host.lower().strip("[]")
    for raw in entries.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "://" in entry:
            parts = urlsplit(entry)
            if parts.scheme in (scheme, "all") and (parts.hostname or "") == host:
                return True
            continue
        name = entry.strip("[]").removeprefix("*").removeprefix(".")
        if host == name or (not _is_ip(name) and host.endswith("." + name)):
            return True
    return False


def _is_ip(name: str) -> bool:
    return ":" in name or name.replace(".", "").isdigit()


def route(
    target: str, env: Mapping[str, str], *, proxy: str | None = None, bypass: bool = False
) -> ProxyRoute:
    """The path a request to ``target`` takes with this environment and these options (see the
    module's rule); ValueError when the proxy's URL is not one."""
    if bypass:
        return ProxyRoute(ProxyPath.DIRECT, RouteSource.BYPASS)
    if proxy is not None:
        return ProxyRoute(ProxyPath.FORWARD, RouteSource.FLAG, parse_proxy(proxy))
    parts = urlsplit(target)
    scheme = parts.scheme or "http"
    found = _env(env, f"{scheme}_proxy") or _env(env, "all_proxy")
    if found is None:
        return ProxyRoute()
    variable, value = found
    skip = _env(env, "no_proxy")
    if skip is not None and _bypassed(parts.hostname or "", scheme, skip[1]):
        return ProxyRoute(ProxyPath.DIRECT, RouteSource.NO_PROXY, variable=skip[0])
    return ProxyRoute(ProxyPath.FORWARD, RouteSource.ENV, parse_proxy(value), variable)
