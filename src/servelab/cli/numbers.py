"""The click types of the numbers an option takes: a real number finite, within its bounds
(:class:`Finite`), a whole number in ASCII digits (:class:`Whole`).

click's ``float`` and ``FloatRange`` accept ``nan`` (every comparison with it is false, so no
bound refuses it) and ``inf``: ``soak --think-time nan`` ran a soak that never started a round and
called it OK. :class:`Finite` refuses both as a usage error (exit 2) naming the option. A time
gets its maximum too (``core/options.MAX_SECONDS``, a day; ``MAX_RUN_SECONDS``, a week for a
run's whole duration): ``soak --think-time 1e308`` is refused, not slept.

click's ``int`` and ``IntRange`` read the digits of every script (``--rounds ٣`` ran 3 rounds,
``case show ౧`` showed case 1) and Python's digit groups (``1_000``): :class:`Whole` takes plain
ASCII digits only, as a script or a
shell's arithmetic writes them, and refuses the rest as a usage error naming the option.
"""

from __future__ import annotations

import math
from typing import Any

import click

from servelab.core.whole import plain_digits

__all__ = ["Finite", "Whole"]


class Finite(click.FloatRange):
    """A finite float within ``min``/``max`` (click's ``FloatRange`` arguments)."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_digits(value):  # ``١.٥``, ``1_0``
            self.fail(f"{value!r} is not a number written in plain ASCII digits.", param, ctx)
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


class Whole(click.IntRange):
    """A whole number written in ASCII digits, within ``min``/``max`` (click's ``IntRange``
    arguments; none: any)."""

    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        super().__init__(min, max)
        if min is None and max is None:
            self.name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not plain_digits(value):  # ``٣``, ``1_000``
            self.fail(f"{value!r} is not a whole number written in plain ASCII digits.", param, ctx)
        return super().convert(value, param, ctx)

    def _describe_range(self) -> str:
        if self.min is None and self.max is None:
            return ""
        return super()._describe_range()
