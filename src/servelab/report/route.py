"""The path a command took to its target, worded: straight, or through which forward proxy and
what decided it (:class:`~servelab.core.load.proxyroute.ProxyRoute`)."""

from __future__ import annotations

from servelab.core.load.proxyroute import ProxyRoute, RouteSource
from servelab.report.text import url_text

__all__ = ["route_text"]


def _why(route: ProxyRoute) -> str:
    match route.source:
        case RouteSource.FLAG:
            return "--proxy"
        case RouteSource.BYPASS:
            return "--no-proxy"
        case RouteSource.ENV:
            return f"from {route.variable}"
        case RouteSource.NO_PROXY:
            return f"{route.variable} names the host"
        case RouteSource.UNSET:
            return "no proxy variable set for its scheme"


def route_text(route: ProxyRoute) -> str:
    """``through the forward proxy http://127.0.0.1:3128 (from HTTPS_PROXY)`` or ``straight
    (--no-proxy)``."""
    if route.forwarded and route.proxy is not None:
        return f"through the forward proxy {url_text(route.proxy)} ({_why(route)})"
    return f"straight ({_why(route)})"
