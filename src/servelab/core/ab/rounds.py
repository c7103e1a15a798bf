"""The bound of ``ab``/``tune --max-rounds``: the ``--plan`` simulation of Pocock's boundary
draws 200,000 x rounds normal numbers (:func:`~servelab.core.ab.sequential.pocock_level`), so
``--max-rounds 1000000`` asked 8 GB and ``99999999999999999999`` died of "Maximum allowed
dimension exceeded". The pure parsers of the option, their :class:`OptionError` a usage error.
"""

from __future__ import annotations

from servelab.core.bounds import whole_number

__all__ = ["MAX_ROUNDS", "parse_ab_rounds", "parse_tune_rounds"]

#: The most rounds an A/B or a tune may plan or run (the demo and the tests use 3 to 12).
MAX_ROUNDS = 50


def parse_ab_rounds(text: str) -> int:
    """An A/B's ``--max-rounds``: 2 to :data:`MAX_ROUNDS`."""
    return whole_number(text, 2, MAX_ROUNDS)


def parse_tune_rounds(text: str) -> int:
    """A tune's ``--max-rounds``: 3 (Pocock's first look) to :data:`MAX_ROUNDS`."""
    return whole_number(text, 3, MAX_ROUNDS)
