"""How long a request may be, checked before any prompt is built (``core/load/lengths.py``)."""

from __future__ import annotations

import pytest

from servelab.core.load.lengths import (
    MAX_TOKENS,
    UNKNOWN_CONTEXT_TOKENS,
    context_limit,
    longest,
    over_context,
)
from servelab.core.load.workload import LengthDist
from servelab.core.options import parse_length
from servelab.errors import OptionError


def test_the_longest_draw_of_each_distribution() -> None:
    assert longest(LengthDist("fixed", 128)) == 128
    assert longest(LengthDist("uniform", 100, 50)) == 150
    assert longest(LengthDist("normal", 100, 10)) == 160  # mean + 6 σ


def test_a_length_past_every_context_is_refused_as_it_is_parsed() -> None:
    """Defect 7 (issue 38): --input-len 100000000 hit MemoryError building its prompts."""
    assert parse_length(str(MAX_TOKENS)).value == MAX_TOKENS
    for text in ("100000000", "uniform:16777000:1000", "normal:128:1e12"):
        with pytest.raises(OptionError, match="over 16,777,216: longer than any model's"):
            parse_length(text)


def test_a_request_is_checked_against_the_context_or_the_cap_for_the_unknown() -> None:
    """Defect 7 (issue 38): with the server's context length known it is the limit; without it,
    a hard cap."""
    assert over_context(4096, 4096) is None
    assert "over the model's context length of 4,096 tokens" in str(over_context(4097, 4096))
    assert context_limit(None) == UNKNOWN_CONTEXT_TOKENS
    assert over_context(UNKNOWN_CONTEXT_TOKENS, None) is None
    unknown = over_context(UNKNOWN_CONTEXT_TOKENS + 1, None)
    assert unknown is not None and "does not list its context length" in unknown
