"""Was the load generator itself the bottleneck? The client-health rule of one bench run (pure).

The bench client watches itself while it runs (ops/bench samples the event-loop lag with a ticker
task and reads ``time.process_time``); this module judges those samples. A run is
``client_bound`` when any of these holds, each with its reason code:

- :data:`REASON_LOOP_LAG` (``"loop-lag"``): event-loop lag p99 above :data:`LAG_LIMIT_MS`: the
  client was late reading streams, so measured latencies include its own delay;
- :data:`REASON_CPU_BUSY` (``"cpu-busy"``): the CPU used while streams were live above
  :data:`CPU_BUSY_LIMIT` of one core's wall time (judged only for runs of at least
  :data:`CPU_BUSY_MIN_WALL_S`);
- :data:`REASON_DISPATCH_DELAY` (``"dispatch-delay"``): dispatch delay (actual − scheduled send)
  p99 above :data:`DISPATCH_LIMIT_MS`: requests left later than scheduled.

Rules return data: the sentences for the codes live in ``servelab.report.bench``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.load.metrics import dispatch_delay_ns
from servelab.core.load.records import RequestRecord
from servelab.core.stats import summarize

__all__ = [
    "CPU_BUSY_LIMIT",
    "CPU_BUSY_MIN_WALL_S",
    "DISPATCH_LIMIT_MS",
    "LAG_LIMIT_MS",
    "REASON_CPU_BUSY",
    "REASON_DISPATCH_DELAY",
    "REASON_LOOP_LAG",
    "ClientHealth",
    "client_health",
]

#: Event-loop lag p99 (ms) above which the client was late reading streams.
LAG_LIMIT_MS = 5.0
#: CPU seconds per wall second (one core) above which the client may be the bottleneck.
CPU_BUSY_LIMIT = 0.7
#: Runs shorter than this (s) are not judged for CPU: too little wall time to tell.
CPU_BUSY_MIN_WALL_S = 1.0
#: Dispatch delay p99 (ms) above which requests left later than scheduled.
DISPATCH_LIMIT_MS = 5.0

REASON_LOOP_LAG = "loop-lag"
REASON_CPU_BUSY = "cpu-busy"
REASON_DISPATCH_DELAY = "dispatch-delay"


@dataclass(frozen=True, slots=True)
class ClientHealth:
    """How the client itself fared during one run."""

    cpu_s: float
    wall_s: float
    cpu_ms_per_token: float | None
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    dispatch_p99_ms: float
    client_bound: bool
    reasons: tuple[str, ...]


def client_health(
    records: Sequence[RequestRecord],
    cpu_s: float,
    wall_s: float,
    lag_s: Sequence[float],
    run_cpu_s: float | None = None,
) -> ClientHealth:
    """Judge whether the client may have been the bottleneck (rules return data).

    ``cpu_s`` (per token) includes decoding after the run; ``run_cpu_s`` is the CPU used while
    streams were live (default ``cpu_s``), judged against ``wall_s`` only for runs of ≥ 1 s.
    """
    busy = cpu_s if run_cpu_s is None else run_cpu_s
    tokens = sum(r.output_tokens for r in records)
    lag = summarize([x * 1e3 for x in lag_s]) if lag_s else summarize([0.0])
    dispatch = summarize([dispatch_delay_ns(r) / 1e6 for r in records if r.sent_ns])
    reasons = []
    if lag.p99 > LAG_LIMIT_MS:
        reasons.append(REASON_LOOP_LAG)
    if wall_s >= CPU_BUSY_MIN_WALL_S and busy / wall_s > CPU_BUSY_LIMIT:
        reasons.append(REASON_CPU_BUSY)
    if dispatch.n and dispatch.p99 > DISPATCH_LIMIT_MS:
        reasons.append(REASON_DISPATCH_DELAY)
    return ClientHealth(
        cpu_s=cpu_s,
        wall_s=wall_s,
        cpu_ms_per_token=cpu_s * 1e3 / tokens if tokens else None,
        loop_lag_p99_ms=lag.p99,
        loop_lag_max_ms=lag.max,
        dispatch_p99_ms=dispatch.p99 if dispatch.n else 0.0,
        client_bound=bool(reasons),
        reasons=tuple(reasons),
    )
