"""The simulator's prefix cache and KV pool (``servelab.sim.prefixcache``, the schedulers)."""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest

from servelab.sim.engineargs import parse_worker_args
from servelab.sim.limits import CachedTokens
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.prefillscheduler import PrefillScheduler
from servelab.sim.prefixcache import PrefixCache, page_hashes
from servelab.sim.profile import DEFAULT_PROFILE, prefill_chunk_s
from servelab.sim.protocol import final_body, parse_request
from servelab.sim.scheduler import DecodeScheduler, Sequence
from servelab.sim.settings import WorkerSettings
from servelab.sim.text import plan_output

P = DEFAULT_PROFILE


def words(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def settings(role: str, *argv: str, time_scale: float = 0.01) -> WorkerSettings:
    args = ["--port", "1", *(["--bootstrap-port", "2"] if role == "prefill" else []), *argv]
    server = parse_worker_args(role, args).server  # type: ignore[arg-type]
    return WorkerSettings(role=role, time_scale=time_scale, engine_args=server)  # type: ignore[arg-type]


def test_page_hashes_are_chained_over_full_pages() -> None:
    a, b = words("a", 10), [*words("a", 8), "x", "y"]
    assert len(page_hashes(a, 4)) == 2  # 10 tokens: two full pages of 4
    assert page_hashes(a, 4)[0] == page_hashes(b, 4)[0]
    assert page_hashes(a, 4)[1] == page_hashes(b, 4)[1]
    assert (
        page_hashes(words("b", 4) + a[4:8], 4)[1] != page_hashes(a, 4)[1]
    )  # same page, other past
    assert (
        page_hashes(a, 1)[:8] == page_hashes(b, 1)[:8]
        and page_hashes(a, 1)[8] != page_hashes(b, 1)[8]
    )


def test_a_prefix_is_served_from_the_cache_and_the_last_token_always_computed() -> None:
    cache = PrefixCache(10_000, 4)
    first = page_hashes(words("s", 100), 4)
    lease = cache.admit(first, 100)
    assert lease is not None and lease.cached_tokens == 0 and cache.reserved == 100
    cache.finish(lease)
    assert cache.cached_tokens == 100 and cache.reserved == 0
    again = cache.admit(first, 100)
    assert again is not None and again.cached_tokens == 96  # at most prompt - 1, whole pages
    cache.finish(again)
    longer = words("s", 100) + words("n", 30)
    lease = cache.admit(page_hashes(longer, 4), 130)
    assert lease is not None and lease.cached_tokens == 100 and lease.reserved == 30
    off = PrefixCache(10_000, 4, enabled=False)
    off.finish(off.admit(first, 100))  # type: ignore[arg-type]
    assert off.match(first, 100) == 0 and off.cached_tokens == 0


def test_the_least_recently_used_leaves_are_evicted_and_locked_pages_never() -> None:
    cache = PrefixCache(240, 4)
    shared = words("sys", 40)
    old = page_hashes(shared + words("old", 40), 4)
    new = page_hashes(shared + words("new", 40), 4)
    for hashes in (old, new):
        lease = cache.admit(hashes, 80)
        assert lease is not None
        cache.finish(lease)
    assert cache.cached_tokens == 120  # the shared 40 once, 40 + 40 after it
    held = cache.admit(page_hashes([*shared, *words("new", 40), *words("more", 4)], 4), 84)
    assert held is not None and held.cached_tokens == 80  # it locks the new session's path
    big = page_hashes(words("big", 150), 4)
    lease = cache.admit(big, 150)  # 124 in use + 150 > 240: evict 34 tokens, whole pages
    assert lease is not None and cache.evicted_tokens == 36
    assert cache.match(old, 80) == 44  # the old session's last 9 pages went, leaves first
    assert cache.match(new, 80) == 76  # the locked path is whole
    assert cache.admit(page_hashes(words("huge", 200), 4), 200) is None  # no room: wait
    forced = cache.admit(page_hashes(words("huge", 200), 4), 200, force=True)
    assert forced is not None  # alone in flight, it runs anyway


async def test_the_prefill_computes_only_the_uncached_tokens() -> None:
    s = settings("prefill")
    sched = PrefillScheduler(s, WorkerMetrics())
    task = asyncio.create_task(sched.run())
    tokens = words("t", 2000)
    try:
        cold = await sched.prefill(2000, 8, tuple(page_hashes(tokens, 1)))
        more = tokens + words("u", 40)
        warm = await sched.prefill(2040, 8, tuple(page_hashes(more, 1)))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert cold.cached_tokens == 0
    assert cold.modelled_s == pytest.approx(P.prefill_a_s + prefill_chunk_s(P, 2000, 0))
    assert warm.cached_tokens == 2000
    assert warm.modelled_s == pytest.approx(P.prefill_a_s + prefill_chunk_s(P, 40, 2000))
    assert warm.modelled_s < cold.modelled_s / 4
    assert sched.cache.cached_tokens == 2040


async def test_without_the_radix_cache_every_prompt_is_computed_whole() -> None:
    sched = PrefillScheduler(settings("prefill", "--disable-radix-cache"), WorkerMetrics())
    task = asyncio.create_task(sched.run())
    hashes = tuple(page_hashes(words("t", 500), 1))
    try:
        results = [await sched.prefill(500, 8, hashes) for _ in range(2)]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [r.cached_tokens for r in results] == [0, 0]


async def test_a_full_decode_pool_retracts_and_every_sequence_still_finishes() -> None:
    metrics = WorkerMetrics()
    s = settings("decode", "--max-total-tokens", "2000", time_scale=0.001)
    sched = DecodeScheduler(s, metrics, lambda: False)
    task = asyncio.create_task(sched.run())
    seqs = [Sequence(plan_output(0, f"p{i}", 60), ctx_tokens=100) for i in range(16)]
    try:
        for seq in seqs:
            sched.join(seq)
        for seq in seqs:
            await asyncio.wait_for(seq.done.wait(), 60)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [seq.n_out for seq in seqs] == [seq.target for seq in seqs]
    assert metrics.retracted_total > 0  # 16 x (100 + 60) tokens do not fit in 2000


@pytest.mark.parametrize(
    ("report", "cached", "details"),
    [
        (CachedTokens.OFF, 40, "absent"),
        (CachedTokens.POSITIVE, 40, {"cached_tokens": 40}),
        (CachedTokens.POSITIVE, 0, None),
        (CachedTokens.ALWAYS, 0, {"cached_tokens": 0}),
    ],
)
def test_cached_tokens_are_reported_as_each_engine_does(
    report: CachedTokens, cached: int, details: object
) -> None:
    req = parse_request("chat", {"messages": [{"role": "user", "content": "hi"}]}, "m")
    assert not isinstance(req, type(None)) and hasattr(req, "items")
    out = plan_output(0, "hi", 2)
    body = final_body(req, [out], [2], "rid", 0, cached=cached, report=report)  # type: ignore[arg-type]
    usage = body["usage"]
    assert usage.get("prompt_tokens_details", "absent") == details


def test_admit_never_evicts_the_prefix_it_has_just_matched() -> None:
    """Defect 27 (issue 38): with the pool full of cached pages, admitting a prompt whose prefix
    is cached evicted that very prefix to make room, then raised KeyError locking it."""
    cache = PrefixCache(4, 1)
    for tokens in (["1", "2"], ["3", "4"]):
        lease = cache.admit(page_hashes(tokens, 1), 2)
        assert lease is not None
        cache.finish(lease)
    hashes = page_hashes(["1", "2", "5"], 1)
    lease = cache.admit(hashes, 3)
    assert lease is not None and lease.cached_tokens == 2 and lease.reserved == 1
    assert cache.match(hashes, 3) == 2  # the matched prefix is still there, locked
    assert cache.match(page_hashes(["3", "4"], 1), 3) == 1  # the other session's leaf went
    cache.finish(lease)
    assert cache.used_tokens <= cache.capacity


def test_an_admit_that_finds_no_room_unlocks_what_it_matched() -> None:
    """Defect 27 (issue 38): a refused admit leaves no lock behind (the pages stay evictable)."""
    cache = PrefixCache(4, 1)
    first = cache.admit(page_hashes(["1", "2"], 1), 2)
    assert first is not None
    cache.finish(first)
    busy = cache.admit(page_hashes(["x", "y"], 1), 2)  # in flight: 2 reserved, 2 cached
    assert busy is not None
    assert cache.admit(page_hashes(["1", "2", "5", "6", "7"], 1), 5) is None
    cache.release(busy)
    big = cache.admit(page_hashes(["a", "b", "c", "d"], 1), 4)
    assert big is not None and cache.evicted_tokens == 2  # the unlocked prefix was evicted


def test_in_use_tokens_is_reservations_plus_locked_pages_through_every_transition() -> None:
    """``in_use_tokens`` is kept as a count (read on every prefill batch); it must equal its
    definition, the reservations and the pages some request locks, whatever the order of admits,
    finishes, releases and evictions."""
    rng = random.Random(7)
    cache = PrefixCache(64 * 16, 16)
    leases = []

    def defined() -> int:
        return cache.reserved + sum(16 for p in cache._pages.values() if p.locks)

    for _ in range(2_000):
        if leases and rng.random() < 0.5:
            lease = leases.pop(rng.randrange(len(leases)))
            (cache.finish if rng.random() < 0.7 else cache.release)(lease)
        else:
            prefix = rng.randrange(6)
            tokens = rng.randrange(16, 200)
            hashes = page_hashes(list(range(prefix * 1000, prefix * 1000 + tokens)), 16)
            lease = cache.admit(hashes, tokens)
            if lease is not None:
                leases.append(lease)
        assert cache.in_use_tokens == defined()
