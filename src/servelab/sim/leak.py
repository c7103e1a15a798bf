"""The ``kv_leak`` fault: a slow KV leak on the decode (pure state; the draw is passed in).

After a KV hand-off the decode may leave a ghost of the request behind: an entry of its transfer
queue still waiting for remote KV that never comes, holding the pages it preallocated for the
prompt. Nothing fails: the client's answer is whole. What shows it is the engine's own gauges over
time: ``sglang:num_decode_transfer_queue_reqs`` and ``sglang:token_usage`` (vLLM:
``vllm:kv_cache_usage_perc``) that never come back down to their floor when the engine is idle,
and a pool that shrinks until the decode admits less and less. The leaked entries are never
reclaimed (no waiting timeout aborts them: that is the leak), until the process restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KvLeak"]


@dataclass
class KvLeak:
    """The ghosts left so far: how many, and the KV tokens they hold."""

    entries: int = 0
    tokens: int = 0

    def after_handoff(self, rate: float, draw: float, prompt_tokens: int) -> bool:
        """One hand-off done: leave a ghost holding ``prompt_tokens`` when ``draw`` (uniform in
        [0, 1), from a seeded generator) falls under ``rate``; whether it did."""
        if rate <= 0.0 or draw >= rate:
            return False
        self.entries += 1
        self.tokens += prompt_tokens
        return True
