"""Long-horizon decay: the engines' gauges that creep over a soak (pure; words in
``report.soak.creep``).

A leak fails nothing at first: every answer is whole while the engine's own gauges climb, round
after round, and never come back down when the engine is idle. :func:`fit` reads one gauge's
``(t, value)`` samples over the run: it cuts them into :data:`WINDOWS` windows of equal time and
takes each window's **floor** (its minimum: what the gauge falls back to between requests), the
floor at the start (the first window: the engines idle after the warm-up), the floor at the end
(the lowest of the last :data:`SETTLE` samples: the scrapes after the traffic stopped), the
least-squares slope of the floors over time (per hour) and how many times a window's floor rose
over the one before. :func:`creeping` is the rule, and its noise guard: a gauge creeps when

- its floor at the end is at least the kind's threshold (:data:`KINDS`) above its floor at the
  start: it did not return to its floor once idle;
- the window floors rose in at least :data:`MIN_STEPS` steps and never fell back by more than
  half the threshold: a slow climb, not one jump (a wedge, a burst) nor a wobble;
- the slope of the floors is positive.

Every gauge but the running requests is read only at the source's **idle** samples: those with
no request running or waiting (``sglang:num_running_reqs`` and ``sglang:num_queue_reqs``, vLLM's
running and waiting, all 0), so a busy engine's growing contexts are never read as a leak, and an
engine that never idles over the soak is not judged on them (a request that never finishes is the
running gauge's creep).

A healthy soak returns to its floor between rounds and at the end, so it names nothing. Fewer than
:data:`MIN_SAMPLES` samples (a soak too short to see decay): not judged, nothing said.

What creeps (the gauges real engines expose, named as they name them):

- ``kv_usage``: ``sglang:token_usage`` / ``vllm:kv_cache_usage_perc`` (0-1; both leave the
  evictable prefix cache out), threshold :data:`KV_RISE`;
- ``running``: ``sglang:num_running_reqs`` / ``vllm:num_requests_running``: requests that never
  finish, threshold one request;
- ``transfer_queue``: ``sglang:num_decode_transfer_queue_reqs``: no engine exposes the age of a
  queue's oldest entry, only its length; a floor that never returns to zero means some entries
  never leave, and the oldest is at least as old as the time since the queue was last at its
  starting floor (:attr:`Fit.stuck_s`), which only grows; threshold one request;
- ``memory``: ``process_resident_memory_bytes`` (Prometheus' process collector, where a source
  exposes it): threshold :data:`RSS_RISE` bytes and :data:`RSS_SHARE` of its start.

Each source whose gauges creep gives one fired :class:`~servelab.core.telemetry.rules.
TelemetryEvidence` (rule :data:`RULE_CREEP`) at the layer that creeps: a decode's at
``decode_transfer`` (the request waiting for remote KV, the decode's side), a prefill's at
``prefill``, the router's at ``router``; that is evidence shown at the layer (the conviction rule's
direct evidence), and a finding of its own even when no request failed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise

from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import (
    FIRED,
    KV_GAUGES,
    QUEUE_GAUGES,
    QUIET,
    RUNNING_GAUGES,
    Cite,
    ServerView,
    TelemetryEvidence,
)
from servelab.core.telemetry.summary import SourceTelemetry

__all__ = [
    "KINDS",
    "KV_RISE",
    "MIN_SAMPLES",
    "MIN_STEPS",
    "RSS_RISE",
    "RSS_SHARE",
    "RULE_CREEP",
    "SETTLE",
    "WINDOWS",
    "CreepKind",
    "Fit",
    "creep_evidence",
    "creeping",
    "crept",
    "fit",
]

RULE_CREEP = "engine_creep"

#: the run is cut into this many windows of equal time, each reduced to its floor
WINDOWS = 6
#: fewer samples than this (a scrape a second): too short a run to judge decay
MIN_SAMPLES = 12
#: the window floors must rise this many times (one jump is a wedge, not a leak)
MIN_STEPS = 3
#: the last samples of the run (taken once the traffic stopped): the floor when idle
SETTLE = 3
#: KV usage (0-1) that must stay in use once idle: half a percent of the pool
KV_RISE = 0.005
#: resident memory that must stay: 64 MiB, and this share of the start
RSS_RISE = 64 * 2**20
RSS_SHARE = 0.10


class CreepKind(StrEnum):
    """What creeps (stored: never change a value)."""

    KV_USAGE = "kv_usage"
    RUNNING = "running"
    TRANSFER_QUEUE = "transfer_queue"
    MEMORY = "memory"


#: Each kind: the gauges that show it (summed over their label sets), the least rise it needs.
KINDS: Mapping[CreepKind, tuple[tuple[str, ...], float]] = {
    CreepKind.KV_USAGE: (KV_GAUGES, KV_RISE),
    CreepKind.RUNNING: (RUNNING_GAUGES, 1.0),
    CreepKind.TRANSFER_QUEUE: (("sglang:num_decode_transfer_queue_reqs",), 1.0),
    CreepKind.MEMORY: (("process_resident_memory_bytes",), float(RSS_RISE)),
}


@dataclass(frozen=True)
class Fit:
    """One gauge over one run: its window floors, its floors at the start and once idle at the
    end, the floors' slope (per hour), the windows whose floor rose, and how long (s) it has been
    above its starting floor without coming back."""

    samples: int
    floors: tuple[float, ...]
    start: float
    end: float
    slope_per_h: float
    steps: int
    stuck_s: float


def _floors(points: Sequence[tuple[float, float]], windows: int) -> list[tuple[float, float]]:
    """Each non-empty window's middle time and floor."""
    t0, t1 = points[0][0], points[-1][0]
    width = (t1 - t0) / windows or 1.0
    out = []
    for i in range(windows):
        lo, hi = t0 + i * width, t0 + (i + 1) * width
        inside = [v for t, v in points if lo <= t < hi or (i == windows - 1 and t == t1)]
        if inside:
            out.append(((lo + hi) / 2, min(inside)))
    return out


def _slope(xy: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of ``xy`` (0 with fewer than two distinct times)."""
    if len({x for x, _ in xy}) < 2:
        return 0.0
    return statistics.linear_regression([x for x, _ in xy], [y for _, y in xy]).slope


def fit(points: Sequence[tuple[float, float]], windows: int = WINDOWS) -> Fit | None:
    """The floors of ``points`` (``(seconds, value)``, in time order); None with fewer than
    :data:`MIN_SAMPLES` samples."""
    if len(points) < MIN_SAMPLES:
        return None
    floors = _floors(points, windows)
    start = floors[0][1]
    end = min(v for _, v in points[-SETTLE:])
    steps = sum(b[1] > a[1] for a, b in pairwise(floors))
    back = [t for t, v in points if v <= start]
    stuck = points[-1][0] - (back[-1] if back else points[0][0])
    return Fit(
        len(points), tuple(v for _, v in floors), start, end, _slope(floors) * 3600.0, steps,
        round(stuck, 3),
    )  # fmt: skip


def creeping(f: Fit, threshold: float) -> bool:
    """The creep rule (see the module): stayed up once idle, climbed in steps, never fell."""
    fell = any(b < a - threshold / 2 for a, b in pairwise(f.floors))
    return f.end - f.start >= threshold and f.steps >= MIN_STEPS and not fell and f.slope_per_h > 0


def _summed(src: SourceTelemetry, names: Sequence[str]) -> list[tuple[float, float]]:
    total: dict[float, float] = {}
    for key, points in src.gauges.items():
        if key.split("{", 1)[0] in names:
            for at, value in points:
                total[at] = total.get(at, 0.0) + value
    return sorted((at, v) for at, v in total.items() if math.isfinite(v))  # overflowed: none


def _threshold(kind: CreepKind, least: float, f: Fit) -> float:
    return max(least, RSS_SHARE * f.start) if kind == CreepKind.MEMORY else least


def _cites(src: SourceTelemetry, kind: CreepKind, f: Fit) -> list[Cite]:
    name = KINDS[kind][0][0]
    cites = [
        Cite(src.service, name, round(f.end - f.start, 4), "rise"),
        Cite(src.service, name, round(f.slope_per_h, 4), "per_hour"),
    ]
    if kind == CreepKind.TRANSFER_QUEUE:
        cites.append(Cite(src.service, name, f.stuck_s, "oldest_s"))
    return cites


def _layer(src: SourceTelemetry, role: str) -> Layer | None:
    if src.kind == "router":
        return Layer.ROUTER
    return {"decode": Layer.DECODE_TRANSFER, "prefill": Layer.PREFILL}.get(role)


def _idle(src: SourceTelemetry) -> set[float] | None:
    """The times the source was idle: no request running or waiting (None: it exposes
    neither gauge)."""
    load = _summed(src, (*RUNNING_GAUGES, *QUEUE_GAUGES))
    return {t for t, v in load if v == 0} if load else None


def _source(src: SourceTelemetry, layer: Layer) -> TelemetryEvidence | None:
    """The source's creep reading: fired with the gauges that creep, quiet when a gauge it
    exposes was judged and none creeps, None when none could be judged. Every gauge but the
    running requests themselves is read at the source's idle times only (:func:`_idle`)."""
    cites: list[Cite] = []
    judged, idle = False, _idle(src)
    for kind, (names, least) in KINDS.items():
        points = _summed(src, names)
        if idle is not None and kind != CreepKind.RUNNING:
            points = [(t, v) for t, v in points if t in idle]
        f = fit(points)
        if f is None:
            continue
        judged = True
        if creeping(f, _threshold(kind, least, f)):
            cites += _cites(src, kind, f)
    if cites:
        worker = None if layer == Layer.ROUTER else src.service
        return TelemetryEvidence(RULE_CREEP, src.service, FIRED, layer, worker, tuple(cites))
    return TelemetryEvidence(RULE_CREEP, src.service, QUIET) if judged else None


def creep_evidence(view: ServerView | None) -> tuple[TelemetryEvidence, ...]:
    """The creep rule over every source of the run that answered (nothing without telemetry,
    for a source that did not answer, or one whose samples are too few to judge)."""
    if view is None or view.run is None:
        return ()
    out = []
    for src in view.run.sources:
        layer = _layer(src, view.roles.get(src.service) or src.role)
        if src.state != "ok" or layer is None:
            continue
        found = _source(src, layer)
        if found is not None:
            out.append(found)
    return tuple(out)


def crept(evidence: Sequence[TelemetryEvidence], layer: Layer) -> bool:
    """Whether the creep rule fired at ``layer`` (a finding even with nothing failed)."""
    return any(e.rule == RULE_CREEP and e.state == FIRED and e.points_at == layer for e in evidence)
