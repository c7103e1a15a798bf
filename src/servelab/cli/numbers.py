"""The one click type of a real number an option takes: finite, within its bounds.

click's ``float`` and ``FloatRange`` accept ``nan`` (every comparison with it is false, so no
bound refuses it) and ``inf``: ``soak --think-time nan`` ran a soak that never started a round and
called it OK. :class:`Finite` refuses both as a usage error (exit 2) naming the option. A time
gets its maximum too (``core/options.MAX_SECONDS``, a day; ``MAX_RUN_SECONDS``, a week for a
run's whole duration): ``soak --think-time 1e308`` is refused, not slept.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["Finite"]


class Finite(click.FloatRange):
    """A finite float within ``min``/``max`` (click's ``FloatRange`` arguments)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():  # ``١.٥``: float reads any digits
            self.fail(f"{value!r} is not a number written in ASCII digits.", param, ctx)
        number = click.FLOAT.convert(value, param, ctx)  # first: nan passes every bound
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        """The bounds as ``--help`` shows them: none without a bound (click's ``x<=None``), one
        side alone, or both."""
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()
