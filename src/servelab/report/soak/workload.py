"""A soak's workload in words: the fresh context its rounds added, the uncached prefill reached."""

from __future__ import annotations

from servelab.core.soak.fresh import FreshContext, UncachedPrefill

__all__ = ["fresh_text", "uncached_text"]


def fresh_text(fresh: FreshContext | None) -> str:
    """The fresh context each round added, as the soak was told."""
    if fresh is None:
        return "fresh context per round: the same short turn every round"
    return (
        f"fresh context per round: short {fresh.short_words} or long {fresh.long_words} words, "
        f"long {fresh.long_share:.0%} of rounds (seeded)"
    )


def uncached_text(u: UncachedPrefill) -> str:
    """The uncached prefill the rounds reached."""
    if not u.requests:
        return "uncached prefill per request: unknown (no usage said its cached tokens)"
    return (
        f"uncached prefill per request: max {u.max_tokens} tokens, p90 {u.p90_tokens} "
        f"(over {u.requests} request(s))"
    )
