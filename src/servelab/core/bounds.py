"""The bounds of the load's counts and a plan's change (pure parsers on top of
:mod:`servelab.core.options`, their :class:`~servelab.errors.OptionError` a usage error):
``--repeat`` (runs per level), ``bench --workers`` (client processes) and ``ab``/``tune --plan
--effect`` (a change above 0: none is nothing to detect).
"""

from __future__ import annotations

from servelab.core.options import parse_fraction
from servelab.core.whole import parse_whole
from servelab.errors import OptionError

__all__ = ["MAX_REPEAT", "MAX_WORKERS", "parse_effect", "parse_repeat", "parse_workers"]

#: The most runs per level (``--repeat``): a Student-t CI is tight long before.
MAX_REPEAT = 1000
#: The most client processes (``bench --workers``): each is a Python process of its own.
MAX_WORKERS = 64


def _count(text: str, high: int) -> int:
    return parse_whole(text, f"a whole number from 1 to {high:,}", 1, high)


def parse_repeat(text: str) -> int:
    """Runs per level (``--repeat``): 1 to :data:`MAX_REPEAT`."""
    return _count(text, MAX_REPEAT)


def parse_workers(text: str) -> int:
    """Client processes (``--workers``): 1 to :data:`MAX_WORKERS`."""
    return _count(text, MAX_WORKERS)


def parse_effect(text: str) -> float:
    """A change to detect (``--plan --effect``): a fraction as
    :func:`~servelab.core.options.parse_fraction` reads it, above 0 (no change is nothing to
    detect: no number of rounds has any power against it)."""
    value = parse_fraction(text)
    if value <= 0.0:
        raise OptionError(f"{text!r} is no change: nothing to detect (give one above 0, e.g. 5%)")
    return value
