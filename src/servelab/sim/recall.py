"""Long-context retrieval ("pass key") prompts and the sparse-attention recall model.

PURE. A retrieval prompt holds the sentence ``The pass key is NNNNNN.`` (six digits) somewhere in
its context and asks ``What is the pass key?`` after it. The simulated model answers
``The pass key is NNNNNN.`` (six tokens, finish reason ``stop``): the key it found when recall
holds, else a different six-digit number, deterministic per (seed, prompt).

Recall is a sparse-attention top-k (DeepSeek-V3.2's DSA indexer, its config key ``index_topk``,
2048 in the model's ``config.json``; set on SGLang with ``--json-model-override-args
'{"index_topk": N}'``, on vLLM with ``--hf-overrides '{"index_topk": N}'``). With T prompt tokens,
the key at depth d (tokens before it over T, 0 = the start) and K = ``index_topk``::

    coverage = min(1, RECALL_SPAN * K / T)          # RECALL_SPAN = 64
    p_fail   = (1 - coverage) * (1 - d / 2)

and a prompt fails when its draw ``u(seed, prompt)`` (uniform in [0, 1)) is below ``p_fail``: recall
always holds up to 64 x K tokens (131,072 with the default), and beyond that fails for a share of
prompts that grows with the length and is larger for a key early in the context (farther from the
question) than for one near the end.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_INDEX_TOPK",
    "QUESTION",
    "RECALL_SPAN",
    "Retrieval",
    "fail_share",
    "find_retrieval",
    "recall_pieces",
    "recalls",
    "wrong_key",
]

#: DeepSeek-V3.2's ``index_topk`` (its ``config.json``).
DEFAULT_INDEX_TOPK = 2048
#: Prompt tokens one top-k slot covers before recall starts to fail.
RECALL_SPAN = 64
QUESTION = "What is the pass key?"
_KEY_RE = re.compile(r"The pass key is (\d{6})\.")
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Retrieval:
    """A retrieval prompt: its key and the key's depth in the prompt (0 = start, 1 = end)."""

    key: str
    depth: float


def find_retrieval(prompt: str) -> Retrieval | None:
    """The prompt's pass key and depth, when it holds the key sentence and the question after it."""
    found = _KEY_RE.search(prompt)
    if found is None or prompt.find(QUESTION, found.end()) < 0:
        return None
    before = len(_TOKEN_RE.findall(prompt[: found.start()]))
    total = max(len(_TOKEN_RE.findall(prompt)), 1)
    return Retrieval(found.group(1), before / total)


def fail_share(prompt_tokens: int, depth: float, index_topk: int) -> float:
    """The share of such prompts whose recall fails (the module's formula)."""
    if prompt_tokens <= 0:
        return 0.0
    coverage = min(1.0, RECALL_SPAN * max(index_topk, 0) / prompt_tokens)
    return (1.0 - coverage) * (1.0 - min(max(depth, 0.0), 1.0) / 2)


def _draw(seed: int, prompt: str, salt: str) -> int:
    digest = hashlib.blake2b(f"{seed}\x00{salt}\x00{prompt}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def recalls(seed: int, prompt: str, prompt_tokens: int, found: Retrieval, index_topk: int) -> bool:
    """Whether the model recalls the key of this prompt."""
    u = _draw(seed, prompt, "recall") / 2**64
    return u >= fail_share(prompt_tokens, found.depth, index_topk)


def wrong_key(seed: int, prompt: str, key: str, salt: str = "wrong") -> str:
    """A six-digit number other than ``key``, deterministic per (seed, prompt, salt)."""
    value = 100_000 + _draw(seed, prompt, salt) % 900_000
    if f"{value}" == key:
        value = 100_000 + (value - 100_000 + 1) % 900_000
    return f"{value}"


def recall_pieces(key: str) -> tuple[str, ...]:
    """The answer's tokens: ``The pass key is NNNNNN.``."""
    return ("The", " pass", " key", " is", f" {key}", ".")
