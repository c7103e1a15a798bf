"""Deterministic output for the simulated model, and a word-level "tokenizer" (no downloads).

PURE. The same (seed, prompt, max_tokens, tools) always gives the same pieces, whatever the load:
the only exception is the ``corrupt`` flag the fault switch sets.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Output", "count_tokens", "plan_output", "tokenize"]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "been",
    "one",
    "all",
    "we",
    "their",
    "has",
    "would",
    "when",
    "if",
    "so",
    "no",
    "will",
    "can",
    "more",
    "other",
    "what",
    "up",
    "out",
    "about",
    "into",
    "than",
    "them",
    "some",
    "could",
    "these",
    "two",
    "may",
    "first",
    "then",
    "do",
    "any",
    "like",
    "my",
    "now",
    "over",
    "such",
    "our",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
    "three",
    "prefill",
    "decode",
    "cache",
    "router",
    "token",
    "batch",
    "kernel",
    "wave",
    "split",
    "tile",
    "engine",
]


@dataclass(frozen=True)
class Output:
    """What the model will say: one string per output token, and how it ends."""

    pieces: tuple[str, ...]
    tool_name: str | None = None
    tool_call_id: str | None = None
    finish_reason: str = "length"

    @property
    def text(self) -> str:
        """The whole output (for a tool call: the arguments string)."""
        return "".join(self.pieces)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` for the built-in word-level tokenizer: words and punctuation marks."""
    return len(_TOKEN_RE.findall(text))


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` (what :func:`count_tokens` counts)."""
    return _TOKEN_RE.findall(text)


def _seed_int(seed: int, prompt: str, salt: str) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{salt}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _words(rng: random.Random, n: int) -> tuple[str, ...]:
    choices = rng.choices(_WORDS, k=n)
    if not choices:
        return ()
    first = choices[0].capitalize()
    return (first, *(" " + w for w in choices[1:]))


def _tool_name(tools: list[Any], rng: random.Random) -> str:
    names = []
    for tool in tools:
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
            if isinstance(name, str) and name:
                names.append(name)
    return rng.choice(names) if names else "tool"


def _tool_pieces(rng: random.Random, max_tokens: int, corrupt: bool) -> tuple[str, ...]:
    n_args = max(1, min(3, (max_tokens - 2) // 4))
    args = {f"arg{i}": " ".join(rng.choices(_WORDS, k=2)) for i in range(n_args)}
    text = json.dumps(args, separators=(",", ":"))
    if corrupt:
        # Broken JSON the way the incident's corruption looked: a cut string, a stray brace.
        text = text[: max(2, len(text) * 2 // 3)] + '"}}'
    size = max(1, -(-len(text) // max(1, max_tokens)))
    size = max(size, 4)
    return tuple(text[i : i + size] for i in range(0, len(text), size))


def plan_output(
    seed: int,
    prompt: str,
    max_tokens: int,
    *,
    tools: list[Any] | None = None,
    corrupt: bool = False,
) -> Output:
    """The deterministic output for (seed, prompt): plain text, or sometimes a tool call.

    With ``tools``, two requests in three (by a hash of seed and prompt) answer with a tool call
    whose arguments are well-formed JSON, unless ``corrupt`` (the fault switch) breaks them.
    """
    n = max(1, max_tokens)
    rng = random.Random(_seed_int(seed, prompt, "text"))
    if tools and _seed_int(seed, prompt, "tool") % 3 != 0:
        name = _tool_name(tools, rng)
        call_id = f"call_{_seed_int(seed, prompt, 'id') % 10**12:012d}"
        pieces = _tool_pieces(rng, n, corrupt)
        return Output(pieces, tool_name=name, tool_call_id=call_id, finish_reason="tool_calls")
    return Output(_words(rng, n))
