"""Deterministic output for the simulated model, and a word-level "tokenizer" (no downloads).

PURE. The same (seed, prompt, max_tokens, tools, tool_choice) always gives the same pieces,
whatever the load; what may change them afterwards (batch nondeterminism, the answer-altering
knob, wrong KV) is :mod:`servelab.sim.answers`, and the ``corrupt`` flag of the
``corrupt_under_load`` switch. Three kinds of answers:

- a **retrieval** prompt (:mod:`servelab.sim.recall`): ``The pass key is NNNNNN.``;
- with ``tools`` (unless ``tool_choice`` is ``"none"``): a **tool call** whose arguments satisfy
  the tool's JSON schema (:mod:`servelab.sim.toolargs`); a ``"required"`` or a named
  ``tool_choice`` always calls, and so does a greedy request (temperature 0) unless the
  conversation's last message is a tool's result; otherwise (sampled, or greedy after a tool
  result) two times in three, by a hash of seed and prompt (an agent loop then gets words, and a
  next user turn, one time in three);
- otherwise **text**: ``max_tokens`` words.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import filterfalse
from typing import Any

from servelab.sim.recall import (
    DEFAULT_INDEX_TOPK,
    find_retrieval,
    recall_pieces,
    recalls,
    wrong_key,
)
from servelab.sim.toolargs import ToolArgs, garbled, plan_args, tool_schema

__all__ = [
    "WORDS",
    "Kind",
    "Output",
    "count_tokens",
    "other_word",
    "plan_output",
    "seed_int",
    "tokenize",
]

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")

WORDS = [
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
#: Every word with its leading space, as a piece after the first (built once, not per token).
_SPACED = tuple(" " + w for w in WORDS)


class Kind(StrEnum):
    """What an answer is: words, a retrieval answer, or a tool call."""

    TEXT = "text"
    RECALL = "recall"
    TOOL = "tool"


@dataclass(frozen=True)
class Output:
    """What the model will say: one string per output token, and how it ends.

    ``root`` identifies the answer (a hash of seed and prompt: what its alternatives and its
    divergences are drawn from), ``greedy`` whether the request decodes greedily (temperature
    0), ``args`` a tool call's arguments while they are well-formed, ``swapped`` the positions
    where the reference's second choice was taken and the token the reference had there.
    """

    pieces: tuple[str, ...]
    tool_name: str | None = None
    tool_call_id: str | None = None
    finish_reason: str = "length"
    root: int = 0
    kind: Kind = Kind.TEXT
    greedy: bool = False
    args: ToolArgs | None = field(default=None, compare=False, hash=False)
    swapped: tuple[tuple[int, str], ...] = ()

    @property
    def text(self) -> str:
        """The whole output (for a tool call: the arguments string)."""
        return "".join(self.pieces)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` for the built-in word-level tokenizer: words and punctuation marks.

    Counted per whitespace-separated part (no token spans whitespace): a part of word
    characters only is one token (``str.isalnum`` is ``\\w`` but the underscore), any other
    part is counted by the tokenizer's pattern, but the commonest, a word and one mark after it
    (``word,``: two tokens), which is told by ``str`` methods in half the time."""
    parts = text.split()
    n = len(parts)
    for part in filterfalse(str.isalnum, parts):
        last = part[-1]
        if part[:-1].isalnum() and not last.isalnum() and last != "_":
            n += 1
        else:
            n += len(_TOKEN_RE.findall(part)) - 1
    return n


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` (what :func:`count_tokens` counts)."""
    return _TOKEN_RE.findall(text)


def seed_int(seed: int, prompt: str, salt: str) -> int:
    """A 64-bit hash of (seed, prompt, salt): every deterministic draw of the model."""
    digest = hashlib.blake2b(f"{seed}\x00{salt}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def other_word(piece: str, draw: int) -> str:
    """A word token other than ``piece``, spelt like it (leading space, capital)."""
    core = piece.strip()
    word = WORDS[draw % len(WORDS)]
    if word == core.lower():
        word = WORDS[(draw + 1) % len(WORDS)]
    if core[:1].isupper():
        word = word.capitalize()
    return (" " if piece.startswith(" ") else "") + word


def _words(rng: random.Random, n: int) -> tuple[str, ...]:
    choices = rng.choices(_SPACED, k=n)  # the same draws as of WORDS: same length, same order
    if not choices:
        return ()
    choices[0] = choices[0][1:].capitalize()
    return tuple(choices)


def _tool_names(tools: list[Any]) -> list[str]:
    names = []
    for tool in tools:
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
            if isinstance(name, str) and name:
                names.append(name)
    return names


def _forced_name(tool_choice: Any) -> str | None:
    """The function a named ``tool_choice`` forces (``{"type": "function", "function": {...}}``)."""
    if isinstance(tool_choice, dict):
        fn = tool_choice.get("function")
        name = fn.get("name") if isinstance(fn, dict) else None
        return name if isinstance(name, str) and name else None
    return None


def _calls_tool(seed: int, prompt: str, tool_choice: Any, greedy: bool, after_tool: bool) -> bool:
    if tool_choice == "none":
        return False
    if tool_choice == "required" or _forced_name(tool_choice) is not None:
        return True
    return (greedy and not after_tool) or seed_int(seed, prompt, "tool") % 3 != 0


def _tool_output(
    seed: int, prompt: str, n: int, tools: list[Any], tool_choice: Any, corrupt: bool
) -> Output:
    rng = random.Random(seed_int(seed, prompt, "text"))
    names = _tool_names(tools)
    name = _forced_name(tool_choice) or (rng.choice(names) if names else "tool")
    planned, pieces = plan_args(tool_schema(tools, name), rng, n)
    args: ToolArgs | None = planned
    if corrupt and len(pieces) > 1:  # corrupt_under_load: broken from the first decoded piece
        pieces, args = garbled(pieces, 1), None
    call_id = f"call_{seed_int(seed, prompt, 'id') % 10**12:012d}"
    return Output(pieces, tool_name=name, tool_call_id=call_id, finish_reason="tool_calls",
                  kind=Kind.TOOL, args=args)  # fmt: skip


def plan_output(
    seed: int,
    prompt: str,
    max_tokens: int,
    *,
    tools: list[Any] | None = None,
    corrupt: bool = False,
    tool_choice: Any = None,
    greedy: bool = False,
    index_topk: int = DEFAULT_INDEX_TOPK,
    after_tool: bool = False,
) -> Output:
    """The deterministic output for (seed, prompt): text, a retrieval answer or a tool call
    (the module's docstring); ``corrupt`` (the fault switch) breaks a tool call's arguments."""
    n = max(1, max_tokens)
    root = seed_int(seed, prompt, "root")
    if tools and _calls_tool(seed, prompt, tool_choice, greedy, after_tool):
        out = _tool_output(seed, prompt, n, tools, tool_choice, corrupt)
    elif (found := find_retrieval(prompt)) is not None:
        ok = recalls(seed, prompt, count_tokens(prompt), found, index_topk)
        pieces = recall_pieces(found.key if ok else wrong_key(seed, prompt, found.key))
        finish = "stop" if n >= len(pieces) else "length"
        out = Output(pieces[:n], finish_reason=finish, kind=Kind.RECALL)
    else:
        out = Output(_words(random.Random(seed_int(seed, prompt, "text")), n))
    return _with(out, root, greedy)


def _with(out: Output, root: int, greedy: bool) -> Output:
    return Output(out.pieces, out.tool_name, out.tool_call_id, out.finish_reason, root,
                  out.kind, greedy, out.args)  # fmt: skip
