"""The worker's Prometheus metrics, with SGLang's names and labels. Rendering returns text (no I/O).

SGLang (``observability/metrics_collector.py``) exposes two collectors' series: the tokenizer's
(labels ``model_name``, ``engine_type``: the requests, tokens, TTFT) and the scheduler's (those
plus ``tp_rank``, ``pp_rank``, ``moe_ep_rank``: queues, usage, transfer failures); the
simulated worker is one rank, 0 of each.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

__all__ = ["TTFT_BUCKETS", "Histogram", "WorkerMetrics"]

# SGLang's TTFT buckets (seconds).
TTFT_BUCKETS = (
    0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0,
    120.0, 160.0,
)  # fmt: skip


@dataclass
class Histogram:
    """A cumulative-bucket histogram."""

    buckets: tuple[float, ...] = TTFT_BUCKETS
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def render(self, name: str, labels: str) -> list[str]:
        """Prometheus exposition lines for this histogram."""
        lines = [f"# HELP {name} Histogram.", f"# TYPE {name} histogram"]
        cumulative = 0
        for bound, count in zip(self.buckets, self.counts, strict=False):
            cumulative += count
            lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {self.n}')
        lines.append(f"{name}_sum{{{labels}}} {self.total}")
        lines.append(f"{name}_count{{{labels}}} {self.n}")
        return lines


@dataclass
class WorkerMetrics:
    """Counters and gauges of one worker; the engine updates them, ``render`` exposes them."""

    model: str = "sim"
    #: SGLang's ``engine_type`` label: ``unified``, ``prefill`` or ``decode``
    engine_type: str = "unified"
    running: int = 0
    stalled: int = 0
    transfer_queue: int = 0
    queued: int = 0
    gen_throughput: float = 0.0
    generation_tokens: int = 0
    prompt_tokens: int = 0
    requests: int = 0
    aborted: int = 0
    transfer_failed: int = 0
    #: the prefix cache: the last prefill batch's hit rate, and per finished prefill the prompt
    #: tokens queried and the cached ones (counted once a prompt had any cached)
    cache_hit_rate: float = 0.0
    prefix_queries: int = 0
    prefix_hits: int = 0
    #: the KV pool's share in use (decode: the running batch; prefill: cache and in flight)
    token_usage: float = 0.0
    #: requests the decode retracted at its last retraction (SGLang's gauge), and in all
    retracted: int = 0
    retracted_total: int = 0
    ttft: Histogram = field(default_factory=Histogram)

    def cached(self, prompt_tokens: int, cached_tokens: int) -> None:
        """One prompt went through the prefix cache."""
        self.prefix_queries += prompt_tokens
        self.prefix_hits += cached_tokens

    def render(self) -> str:
        """The ``/metrics`` body."""
        tokenizer = f'model_name="{self.model}",engine_type="{self.engine_type}"'
        scheduler = f'{tokenizer},tp_rank="0",pp_rank="0",moe_ep_rank="0"'
        series = (
            ("sglang:num_running_reqs", "gauge", scheduler, self.running + self.stalled),
            ("sglang:num_queue_reqs", "gauge", scheduler, self.queued),
            ("sglang:num_decode_transfer_queue_reqs", "gauge", scheduler, self.transfer_queue),
            ("sglang:gen_throughput", "gauge", scheduler, round(self.gen_throughput, 3)),
            ("sglang:generation_tokens_total", "counter", tokenizer, self.generation_tokens),
            ("sglang:prompt_tokens_total", "counter", tokenizer, self.prompt_tokens),
            ("sglang:num_requests_total", "counter", tokenizer, self.requests),
            ("sglang:num_aborted_requests_total", "counter", tokenizer, self.aborted),
            ("sglang:num_transfer_failed_reqs_total", "counter", scheduler, self.transfer_failed),
            ("sglang:cache_hit_rate", "gauge", scheduler, round(self.cache_hit_rate, 4)),
            ("sglang:token_usage", "gauge", scheduler, round(self.token_usage, 4)),
            ("sglang:num_retracted_reqs", "gauge", scheduler, self.retracted),
        )
        lines: list[str] = []
        for name, kind, labels, value in series:
            lines += [
                f"# HELP {name} {name}.",
                f"# TYPE {name} {kind}",
                f"{name}{{{labels}}} {value}",
            ]
        if self.prefix_hits:  # a labelled series appears once first counted, as in SGLang
            name, cached = "sglang:cached_tokens_total", f'{tokenizer},cache_source="device"'
            lines += [f"# HELP {name} Number of cached prompt tokens by source.",
                      f"# TYPE {name} counter",
                      f"{name}{{{cached}}} {self.prefix_hits}"]  # fmt: skip
        lines += self.ttft.render("sglang:time_to_first_token_seconds", tokenizer)
        return "\n".join(lines) + "\n"
