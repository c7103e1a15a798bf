"""Where a changed answer went wrong: the KV hand-off, or later (pure).

What a real PD deployment lets a client see: the answer's tokens, and with ``logprobs`` each
position's top-1 token (:attr:`~servelab.core.answers.answer.Answer.top1`). On SGLang the prefill
computes the answer's first token itself, from the prompt it has just run, and hands it to the
decode with the KV (``srt/disaggregation/decode.py`` puts it first in the decode's output); every
later token is computed by the decode from the transferred KV. So an answer whose first token agrees
with its reference while everything from the decode's first token (position 1) differs, in every
changed probe, at concurrency 1 (no batch to vary with), is the signature of KV that arrived wrong:
the differential a real deployment allows (the same prompt through a path that does not transfer
is not one: a PD decode serves nothing without a hand-off). A difference that starts later is a
decode's numerics or its batch (:data:`AnswerSite.LATER`); without log-probabilities the position
cannot be read (:data:`AnswerSite.UNKNOWN`, never a guess).

This cannot separate a wrong transfer from a decode whose very first step computes wrongly from
right KV; the pair layer of ``verify`` names a KV layout the two sides disagree on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.answers.answer import Answer

__all__ = ["FIRST_DECODED", "AnswerSite", "Divergence", "diverge_at", "site_of"]

#: The first position the decode computes from the transferred KV (the prefill's token is 0).
FIRST_DECODED = 1


class AnswerSite(StrEnum):
    """Where the changed answers went wrong (stored: values unchanged)."""

    KV_TRANSFER = "kv_transfer"  # the prefill's token agrees, the decode's differ from the first
    LATER = "later"  # differences start later in the answer (or not in every probe at once)
    UNKNOWN = "unknown"  # no log-probabilities to read the positions from


@dataclass(frozen=True)
class Divergence:
    """One changed answer against its reference: the first position whose top-1 token differs
    (None: unknown, no log-probabilities on one side) and whether the first token agrees."""

    probe: int
    at: int | None
    first_token_agrees: bool | None


def diverge_at(answer: Answer, reference: Answer) -> Divergence:
    """Where ``answer`` first differs from ``reference`` by their top-1 tokens (a shorter one
    differs where it ends)."""
    if not answer.top1 or not reference.top1:
        return Divergence(answer.probe, None, None)
    pairs = zip(answer.top1, reference.top1, strict=False)
    at = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    if at is None and len(answer.top1) != len(reference.top1):
        at = min(len(answer.top1), len(reference.top1))
    return Divergence(answer.probe, at, answer.top1[0] == reference.top1[0])


def site_of(changed: Sequence[Divergence], first_decoded: int = FIRST_DECODED) -> AnswerSite:
    """Where ``changed`` (every changed probe of one check, at concurrency 1) went wrong: the
    hand-off when at least two changed and each kept the prefill's token and differs from the
    decode's first (``first_decoded``) on; unknown when a position cannot be read."""
    if not changed:
        return AnswerSite.LATER
    if any(d.at is None for d in changed):
        return AnswerSite.UNKNOWN
    at_handoff = all(d.at == first_decoded and d.first_token_agrees for d in changed)
    return AnswerSite.KV_TRANSFER if at_handoff and len(changed) >= 2 else AnswerSite.LATER
