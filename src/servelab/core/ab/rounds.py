"""The bound of ``ab``/``tune --max-rounds``: the ``--plan`` simulation of Pocock's boundary
draws 200,000 x rounds normal numbers (:func:`~servelab.core.ab.sequential.pocock_level`), so
``--max-rounds 1000000`` asked 8 GB and ``99999999999999999999`` died of "Maximum allowed
dimension exceeded". The pure parsers of the option, their :class:`OptionError` a usage error.
"""

from __future__ import annotations

from servelab.core.whole import parse_whole

__all__ = ["MAX_ROUNDS", "parse_ab_rounds", "parse_tune_rounds"]

#: The most rounds an A/B or a tune may plan or run (the demo and the tests use 3 to 12).
MAX_ROUNDS = 50


def _rounds(text: str, low: int) -> int:
    return parse_whole(text, f"a whole number from {low} to {MAX_ROUNDS}", low, MAX_ROUNDS)


def parse_ab_rounds(text: str) -> int:
    """An A/B's ``--max-rounds``: 2 to :data:`MAX_ROUNDS`."""
    return _rounds(text, 2)


def parse_tune_rounds(text: str) -> int:
    """A tune's ``--max-rounds``: 3 (Pocock's first look) to :data:`MAX_ROUNDS`."""
    return _rounds(text, 3)
