"""What changes the simulated model's answers, and its log-probabilities.

PURE. An answer (:class:`~servelab.sim.text.Output`) is fixed for (seed, prompt) when the request
arrives; three things can change it afterwards, each deterministic for a given schedule:

- **Batch nondeterminism** (the fault switch ``batch_nondeterminism`` = RATE, off by default):
  real engines are not batch-invariant (the reduction order of a kernel depends on the batch, so
  greedy output depends on what else runs: SGLang's ``--enable-deterministic-inference`` and
  vLLM's batch-invariant mode exist to remove it). Each greedy token the decode emits in a step
  over a batch of B takes its second choice with probability ``RATE * B / 64``, drawn from
  (answer, position, B): :func:`flips`. The text then goes its own way from that token; a tool
  call's arguments stay valid for the schema (the value at or after that token changes).
- **bf16 index keys** (``SGLANG_NSA_INDEX_KEYS_BF16=1`` on the decode, read at start-up): the
  incident's tool-call corruption at high concurrency. CUDA graphs are captured per batch size;
  above :data:`BF16_MIN_BATCH` running requests the captured graphs read the bf16 keys with the
  wrong layout, and one answer in three (``root % 3 == 0``) goes wrong from its token
  ``1 + (root >> 8) % 4`` on, when that token is emitted in a step over more than 16 requests:
  :func:`bf16_position`. The change is a :data:`Change.GARBLE`.
- **Wrong KV** (the fault switch ``kv_corrupt``): the decode continues from KV that is not the
  prompt's, from its first decoded token (position 1) on: a ``GARBLE``.

A ``GARBLE`` changes a text from the token on (the retrieval answer's key is then wrong) and
breaks a tool call's arguments (invalid JSON, :func:`~servelab.sim.toolargs.garbled`); every
change keeps the number of tokens (so ``usage`` is unchanged) and the finish reason.

Log-probabilities (:func:`top_alternatives`): at each position the chosen token is the top-1
(greedy); the others are deterministic alternatives, the second being the token a flip would take.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from enum import StrEnum

from servelab.sim.recall import recall_pieces, wrong_key
from servelab.sim.text import WORDS, Kind, Output, other_word, seed_int
from servelab.sim.toolargs import garbled

__all__ = [
    "BF16_MIN_BATCH",
    "FLIP_BATCH",
    "Change",
    "bf16_position",
    "diverge",
    "flip_probability",
    "flips",
    "perturb_token",
    "second_choice",
    "top_alternatives",
]

#: Batch size at which the flip probability equals the rate.
FLIP_BATCH = 64
#: The bf16 index keys alter answers only in steps over more running requests than this.
BF16_MIN_BATCH = 16


class Change(StrEnum):
    """How an answer is changed at a token."""

    FLIP = "flip"  # the token's second choice (batch nondeterminism): still well-formed
    GARBLE = "garble"  # wrong numerics or wrong KV: differs from here, a tool call broken


def _draw(root: int, *parts: object) -> int:
    return seed_int(root, "\x00".join(str(p) for p in parts), "answers")


def flip_probability(rate: float, batch: int) -> float:
    """The chance that a greedy token flips in a step over ``batch`` requests."""
    return min(1.0, max(rate, 0.0) * max(batch, 0) / FLIP_BATCH)


def flips(root: int, position: int, batch: int, rate: float) -> bool:
    """Whether the greedy token at ``position`` of answer ``root`` flips in a step over
    ``batch`` requests (reproducible for a given schedule)."""
    if rate <= 0.0:
        return False
    return _draw(root, "flip", position, batch) / 2**64 < flip_probability(rate, batch)


def bf16_position(root: int) -> int | None:
    """The token from which the bf16 index keys alter answer ``root`` (None: one answer in
    three is altered, the others never)."""
    return 1 + (root >> 8) % 4 if root % 3 == 0 else None


def _wrong_recall(out: Output, k: int) -> tuple[str, ...]:
    key = out.pieces[4].strip() if len(out.pieces) > 4 else ""
    wrong = wrong_key(out.root, f"{k}", key, "diverged")
    return recall_pieces(wrong)[: len(out.pieces)]


def second_choice(out: Output, k: int) -> str:
    """The token a flip at position ``k`` takes (the second of the log-probabilities)."""
    piece = out.pieces[k]
    if out.kind is Kind.RECALL and k == 4:
        return _wrong_recall(out, k)[4]
    if out.kind is Kind.RECALL and k == 5:
        return "!"
    if out.kind is Kind.TOOL and out.args is not None:
        rng = random.Random(_draw(out.root, "alt", k))
        other = out.args.diverged(out.pieces, k, rng)[1][k]
        if other != piece:
            return other
    return other_word(piece, _draw(out.root, "second", k, piece))


def _words_from(out: Output, k: int, first: str) -> tuple[str, ...]:
    rng = random.Random(_draw(out.root, "continue", k, first))
    rest = tuple(" " + w for w in rng.choices(WORDS, k=len(out.pieces) - k - 1))
    return (*out.pieces[:k], first, *rest)


def diverge(out: Output, k: int, change: Change) -> Output:
    """``out`` changed at position ``k`` (>= 1, the prefill's first token is never changed)."""
    if not 1 <= k < len(out.pieces):
        return out
    if out.kind is Kind.TOOL:
        if change is Change.GARBLE or out.args is None:
            return replace(out, pieces=garbled(out.pieces, k), args=None)
        args, pieces = out.args.diverged(out.pieces, k, random.Random(_draw(out.root, "alt", k)))
        took = pieces[k] != out.pieces[k]
        swapped = (*out.swapped, (k, out.pieces[k])) if took else out.swapped
        return replace(out, pieces=pieces, args=args, swapped=swapped)
    first = second_choice(out, k)
    if out.kind is Kind.RECALL:
        wrong = _wrong_recall(out, k)
        pieces = (*out.pieces[:k], first, *wrong[k + 1 :])
    else:
        pieces = _words_from(out, k, first)
    swapped = (*out.swapped, (k, out.pieces[k])) if change is Change.FLIP else out.swapped
    return replace(out, pieces=pieces, swapped=swapped)


def _probabilities(out: Output, k: int, n: int, swapped: bool) -> list[float]:
    u = _draw(out.root, "p", k) / 2**64
    if swapped:  # a near tie: what made it flip
        p0 = 0.40 + 0.05 * u
        probs = [p0, p0 - 0.02 * u]
    else:
        p0 = 0.5 + 0.49 * u
        probs = [p0, (1 - p0) * 0.6]
    rest = 1.0 - sum(probs)
    probs += [rest * 0.6 * 0.4**i for i in range(max(n - 2, 0))]
    return probs[:n]


def top_alternatives(out: Output, k: int, n: int) -> list[tuple[str, float]]:
    """The ``max(n, 1)`` most likely tokens at position ``k`` with their log-probabilities,
    highest first; the chosen token first."""
    n = max(n, 1)
    piece = out.pieces[k]
    before = dict(out.swapped).get(k)
    second = before if before is not None else second_choice(out, k)
    tokens = [piece] + ([second] if second != piece else [])
    draw = _draw(out.root, "others", k, piece)
    while len(tokens) < n:
        word = other_word(piece, draw)
        draw = _draw(draw, "next")
        if word not in tokens:
            tokens.append(word)
    probs = _probabilities(out, k, n, before is not None)
    return [(t, math.log(p)) for t, p in zip(tokens[:n], probs, strict=False)]


def perturb_token(out: Output, k: int, batch: int, rate: float, bf16: bool) -> Output:
    """``out`` after its token ``k`` was emitted in a decode step over ``batch`` requests, with
    batch nondeterminism at ``rate`` and the bf16 index keys on or off (the module's rules)."""
    if k < 1:
        return out
    if bf16 and batch > BF16_MIN_BATCH and bf16_position(out.root) == k:
        return diverge(out, k, Change.GARBLE)
    if out.greedy and flips(out.root, k, batch, rate):
        return diverge(out, k, Change.FLIP)
    return out
