"""Fresh context per round (pure): how much new, uncached content each agent round adds, and the
uncached prefill the rounds reached.

With the prefix cache on, a warm round prefills only what it adds, so a fault that needs a long
uncached prefill (a proxy's read timeout in front of a slow prefill) is never triggered by rounds
that add little. Real agentic rounds add long new content (tool outputs, retrieved files): a
:class:`FreshContext` makes each round's new turn (the user turn, or each tool result) short or
long, by a stated mix, seeded by the soak's seed, the session and the round
(:meth:`FreshContext.words`), so the same ``--seed`` replays the same traffic.
:func:`uncached_prefill` reads what the rounds reached from the answers' ``usage``: the prompt
tokens minus ``prompt_tokens_details.cached_tokens``, the maximum and the 90th percentile.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from servelab.core.load.lengths import UNKNOWN_CONTEXT_TOKENS
from servelab.core.load.records import RequestRecord

__all__ = [
    "MAX_FRESH_WORDS",
    "FreshContext",
    "UncachedPrefill",
    "parse_fresh_context",
    "uncached_prefill",
]


#: The most fresh words a round may add: no context holds more (the longest a request may be
#: when the server does not say, :data:`servelab.core.load.lengths.UNKNOWN_CONTEXT_TOKENS`).
MAX_FRESH_WORDS = UNKNOWN_CONTEXT_TOKENS


@dataclass(frozen=True, slots=True)
class FreshContext:
    """Each round's new turn: ``long_words`` words with probability ``long_share``, else
    ``short_words`` (words of generated text; a word is about one token)."""

    short_words: int = 48
    long_words: int = 1200
    long_share: float = 0.25

    def __post_init__(self) -> None:
        if not 1 <= self.short_words <= self.long_words:
            raise ValueError("fresh context: need 1 ≤ short ≤ long words")
        if self.long_words > MAX_FRESH_WORDS:
            raise ValueError(
                f"fresh context: at most {MAX_FRESH_WORDS:,} words a round, got {self.long_words:,}"
            )
        if not 0.0 <= self.long_share <= 1.0:
            raise ValueError(f"long share must be in [0, 1], got {self.long_share}")

    def words(self, seed: int, session: int, round_: int) -> int:
        """The words round ``round_`` of ``session`` adds (the same for the same seed)."""
        draw = random.Random(f"fresh:{seed}:{session}:{round_}").random()
        return self.long_words if draw < self.long_share else self.short_words


def parse_fresh_context(text: str) -> tuple[int, int]:
    """``short:200,long:4000`` → (200, 4000); ValueError when it is not that shape."""
    sizes: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition(":")
        if not sep or name not in ("short", "long") or name in sizes:
            raise ValueError(f"expected short:WORDS,long:WORDS, got {text!r}")
        if not (value.strip().isascii() and value.strip().isdigit()):
            raise ValueError(f"{name}: expected a whole number of words, got {value!r}")
        if len(value.strip()) > 9 or int(value) > MAX_FRESH_WORDS:
            raise ValueError(f"{name}: at most {MAX_FRESH_WORDS:,} words a round, got {value!r}")
        sizes[name] = int(value)
    if set(sizes) != {"short", "long"}:
        raise ValueError(f"expected short:WORDS,long:WORDS, got {text!r}")
    return sizes["short"], sizes["long"]


@dataclass(frozen=True, slots=True)
class UncachedPrefill:
    """The prompt tokens the engines prefilled uncached, per answered request whose ``usage``
    said both its prompt and its cached tokens: the maximum, the 90th percentile (nearest rank),
    and how many requests that is from (0: unknown, the others None)."""

    max_tokens: int | None = None
    p90_tokens: int | None = None
    requests: int = 0


def uncached_prefill(records: Iterable[RequestRecord]) -> UncachedPrefill:
    """What the rounds' uncached prefills reached (see :class:`UncachedPrefill`)."""
    sizes = sorted(
        max(0, r.input_tokens - r.cached_tokens)
        for r in records
        if r.ok and r.cached_tokens is not None and r.input_tokens > 0
    )
    if not sizes:
        return UncachedPrefill()
    p90 = sizes[max(0, math.ceil(0.9 * len(sizes)) - 1)]
    return UncachedPrefill(sizes[-1], p90, len(sizes))
