"""What the engines' prefix caches served (pure): cached prompt tokens and the hit rate, per run,
per conversation of a replayed trace, and per request.

A request's cached tokens are what its ``usage`` said (:attr:`RequestRecord.cached_tokens
<servelab.core.load.records.RequestRecord.cached_tokens>`: SGLang with ``--enable-cache-report``,
vLLM with ``--enable-prompt-tokens-details``). The hit rate is cached over prompt tokens, summed
over the successful requests that reported one. Where none did, it is unknown (None), never 0: an
engine without its report switched on says nothing about its cache.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pydantic import computed_field

from servelab.core.load.records import RequestRecord

__all__ = ["CacheSummary", "SessionSummary", "cache_summary", "merged", "session_summaries"]


@dataclass(frozen=True, slots=True)
class CacheSummary:
    """Cached and prompt tokens of the ``reported`` requests that told their cached tokens (of
    ``requests`` successful ones)."""

    requests: int = 0
    reported: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hit_rate(self) -> float | None:
        """Cached over prompt tokens of the requests that reported; None: none reported."""
        if not self.reported or not self.prompt_tokens:
            return None
        return self.cached_tokens / self.prompt_tokens


def cache_summary(records: Iterable[RequestRecord]) -> CacheSummary:
    """The successful measured requests' cache figures."""
    requests = reported = prompt = cached = 0
    for r in records:
        if r.warmup or not r.ok:
            continue
        requests += 1
        if r.cached_tokens is not None:
            reported += 1
            prompt += r.input_tokens
            cached += r.cached_tokens
    return CacheSummary(requests, reported, prompt, cached)


def merged(summaries: Iterable[CacheSummary]) -> CacheSummary:
    """Several summaries as one (their counts added)."""
    requests = reported = prompt = cached = 0
    for s in summaries:
        requests += s.requests
        reported += s.reported
        prompt += s.prompt_tokens
        cached += s.cached_tokens
    return CacheSummary(requests, reported, prompt, cached)


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One conversation of a replayed trace: its ``session`` id as the trace names it, its
    requests (``failed`` of them), and its cache figures over every turn and over the turns
    after the first (``warm``: what a cache that kept the conversation's history serves)."""

    session: str
    requests: int
    failed: int
    cache: CacheSummary
    warm: CacheSummary


def session_summaries(
    records: Iterable[RequestRecord], names: Mapping[int, str]
) -> tuple[SessionSummary, ...]:
    """One summary per conversation in ``names`` (ordinal → the trace's id), in ordinal order,
    from the records that carry its ordinal (their turns in index order)."""
    turns: dict[int, list[RequestRecord]] = {}
    for r in records:
        if r.session is not None and r.session in names and not r.warmup:
            turns.setdefault(r.session, []).append(r)
    out = []
    for ordinal in sorted(turns):
        mine = sorted(turns[ordinal], key=lambda r: r.index)
        out.append(
            SessionSummary(
                session=names[ordinal],
                requests=len(mine),
                failed=sum(1 for r in mine if not r.ok),
                cache=cache_summary(mine),
                warm=cache_summary(mine[1:]),
            )
        )
    return tuple(out)
