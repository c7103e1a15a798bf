"""The prefill's prefix cache, modelled on SGLang's radix cache (vLLM's prefix caching alike).

PURE data: no I/O, no clock. A prompt's tokens are cut into pages of ``page_size`` tokens
(SGLang's ``--page-size``, vLLM's ``--block-size``); each full page is named by a chained hash
(the hash of the page's tokens and of the hash before it, as vLLM's block hashes and SGLang's
paged radix keys), so equal hashes mean equal prefixes. A request's cached prefix is the run of
its leading page hashes the cache holds, at most ``prompt - 1`` tokens (the engine always computes
the last token to sample from it).

The KV pool (``Limits.pool_tokens``) holds the cached pages and the tokens of the requests in
flight. :meth:`PrefixCache.admit` locks a request's cached path and reserves its new tokens,
evicting the least recently used unlocked pages first (SGLang's ``evict``: leaves, LRU); the
path is locked before any eviction, so making room never takes the prefix just matched (SGLang's
``inc_lock_ref`` on the matched node before ``evict``). When even that leaves no room the request
waits. :meth:`PrefixCache.finish` inserts its full pages and releases its reservation. Eviction
takes leaves only: a use touches a path from its deepest page to its root, so a page is always
more recent than every page below it, and the least recently used unlocked page is a leaf.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Lease", "PrefixCache", "page_hashes"]


def page_hashes(tokens: Sequence[str], page_size: int) -> list[int]:
    """The chained hash of every full page of ``tokens``."""
    out: list[int] = []
    h = 0
    for start in range(0, len(tokens) - page_size + 1, page_size):
        h = hash((h, *tokens[start : start + page_size]))
        out.append(h)
    return out


@dataclass
class _Page:
    parent: int | None
    children: int = 0
    locks: int = 0


@dataclass(frozen=True)
class Lease:
    """A request admitted to the pool: its page hashes, how many of them are cached (it locks
    those), the tokens it reserved (its new ones) and the cached tokens."""

    hashes: tuple[int, ...]
    cached_pages: int
    reserved: int
    cached_tokens: int


class PrefixCache:
    """Cached pages in LRU order, the pool they share with the requests in flight."""

    def __init__(self, capacity_tokens: int, page_size: int, *, enabled: bool = True) -> None:
        self.capacity = capacity_tokens
        self.page_size = page_size
        self.enabled = enabled
        self._pages: OrderedDict[int, _Page] = OrderedDict()
        self.reserved = 0
        self._locked_pages = 0  #: pages with a lock (kept as locks change: read per batch)
        self.evicted_tokens = 0

    @property
    def cached_tokens(self) -> int:
        """Tokens held by cached pages."""
        return len(self._pages) * self.page_size

    @property
    def used_tokens(self) -> int:
        """Tokens of the pool in use: cached pages and in-flight reservations."""
        return self.cached_tokens + self.reserved

    @property
    def in_use_tokens(self) -> int:
        """Tokens requests in flight hold: their reservations and the cached pages they lock
        (what is not evictable)."""
        return self.reserved + self._locked_pages * self.page_size

    def _usable(self, hashes: Sequence[int], prompt_tokens: int) -> int:
        """Leading pages of ``hashes`` that are cached (at most ``prompt - 1`` tokens)."""
        if not self.enabled:
            return 0
        limit = max(prompt_tokens - 1, 0) // self.page_size
        n = 0
        for h in hashes[:limit]:
            if h not in self._pages:
                break
            n += 1
        return n

    def match(self, hashes: Sequence[int], prompt_tokens: int) -> int:
        """Tokens of the prompt's prefix in the cache now (no lock, no touch)."""
        return self._usable(hashes, prompt_tokens) * self.page_size

    def _touch(self, hashes: Sequence[int]) -> None:
        """Deepest page first, so every page ends more recent than the pages below it."""
        for h in reversed(hashes):
            self._pages.move_to_end(h)

    def _evict(self, tokens: int) -> None:
        """Free at least ``tokens`` by evicting unlocked leaves, least recently used first."""
        freed = 0
        while freed < tokens:
            victim = next(
                (h for h, p in self._pages.items() if not p.locks and not p.children), None
            )
            if victim is None:
                return
            page = self._pages.pop(victim)
            if page.parent is not None and page.parent in self._pages:
                self._pages[page.parent].children -= 1
            freed += self.page_size
            self.evicted_tokens += self.page_size

    def admit(
        self, hashes: Sequence[int], prompt_tokens: int, *, force: bool = False
    ) -> Lease | None:
        """Lock the prompt's cached pages and reserve its new tokens; None when the pool has no
        room even after evicting (``force``: admit anyway, the only request in flight)."""
        n = self._usable(hashes, prompt_tokens)
        new = prompt_tokens - n * self.page_size
        lease = Lease(tuple(hashes), n, new, n * self.page_size)
        path = hashes[:n]
        for h in path:  # pinned before making room: eviction never takes the matched prefix
            page = self._pages[h]
            self._locked_pages += page.locks == 0
            page.locks += 1
        short = self.used_tokens + new - self.capacity
        if short > 0:
            self._evict(short)
            if self.used_tokens + new > self.capacity and not force:
                self._unlock(lease)
                return None
        self._touch(path)
        self.reserved += new
        return lease

    def finish(self, lease: Lease) -> None:
        """The request's KV is computed: insert its full pages (its cached path still locked,
        so making room never evicts it), then release it."""
        self.reserved -= lease.reserved
        inserted: list[int] = []
        if self.enabled:
            parent = lease.hashes[lease.cached_pages - 1] if lease.cached_pages else None
            for h in lease.hashes[lease.cached_pages :]:
                if h not in self._pages:
                    if self.used_tokens + self.page_size > self.capacity:
                        self._evict(self.page_size)
                    if self.used_tokens + self.page_size > self.capacity:
                        break
                    self._pages[h] = _Page(parent)
                    if parent is not None:
                        self._pages[parent].children += 1
                inserted.append(h)
                parent = h
        self._unlock(lease)
        self._touch([*lease.hashes[: lease.cached_pages], *inserted])

    def release(self, lease: Lease) -> None:
        """The request left before its KV was computed: drop its reservation and locks."""
        self.reserved -= lease.reserved
        self._unlock(lease)

    def _unlock(self, lease: Lease) -> None:
        for h in lease.hashes[: lease.cached_pages]:
            page = self._pages.get(h)
            if page is not None:
                page.locks -= 1
                self._locked_pages -= page.locks == 0
