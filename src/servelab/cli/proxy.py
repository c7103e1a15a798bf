"""``--proxy URL`` and ``--no-proxy``: the path ``soak``, ``bench`` and ``verify`` take to their
target, decided as the agents' client decides it (:func:`servelab.core.load.proxyroute.route`,
from this process's ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY``/``NO_PROXY``)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from servelab.cli.sharedoption import Parsed
from servelab.core.load.proxyroute import ProxyRoute, parse_proxy, route
from servelab.errors import OptionError

__all__ = ["ProxyOptions", "proxy_env", "proxy_options"]

Command = Callable[..., Any]


@dataclass(frozen=True)
class ProxyOptions:
    """``--proxy URL`` (None: the environment decides) and ``--no-proxy``."""

    proxy: str | None
    bypass: bool

    def route(self, target: str) -> ProxyRoute:
        """The path to ``target`` with these options and this process's environment; a usage
        error (exit 2) when the proxy's URL is not one."""
        if self.proxy is not None and self.bypass:
            raise click.UsageError("--proxy and --no-proxy exclude each other")
        try:
            return route(target, os.environ, proxy=self.proxy, bypass=self.bypass)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--proxy or *_PROXY") from None


def _proxy_url(text: str) -> str:
    """``--proxy``'s value, refused while parsing when it is not ``http://HOST[:PORT]``."""
    try:
        return parse_proxy(text)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def proxy_env(env: Mapping[str, str]) -> dict[str, str]:
    """Only the proxy variables of ``env`` (``*_PROXY``, either case): what a route reads."""
    return {name: value for name, value in env.items() if name.lower().endswith("_proxy")}


def proxy_options(func: Command) -> Command:
    """``--proxy`` and ``--no-proxy`` as ``proxy: ProxyOptions``."""

    @functools.wraps(func)
    def command(*args: Any, **kwargs: Any) -> Any:
        kwargs["proxy"] = ProxyOptions(kwargs.pop("proxy_url"), kwargs.pop("no_proxy"))
        return func(*args, **kwargs)

    declared: Command = click.option(
        "--no-proxy",
        is_flag=True,
        help="Go straight to the target, whatever HTTP_PROXY/HTTPS_PROXY/ALL_PROXY say.",
    )(command)
    return click.option(
        "--proxy",
        "proxy_url",
        default=None,
        type=Parsed("URL", _proxy_url),
        help="Send through this forward proxy (http://HOST:PORT), as an agent whose "
        "HTTP_PROXY/HTTPS_PROXY names it; default: those variables (and NO_PROXY), as the "
        "OpenAI SDK (httpx) reads them.",
    )(declared)
