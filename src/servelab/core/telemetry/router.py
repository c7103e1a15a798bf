"""The router's own telemetry, parsed (pure): its Prometheus metrics, ``/workers``, ``/get_loads``.

sglang-router 0.3.2 and smg 1.13 export ``smg_*`` series on their Prometheus port (smg adds the
PD latency histograms ``smg_pd_ttft_seconds`` and ``smg_pd_prefill_duration_seconds``): per worker
``smg_worker_cb_state`` (0 closed, 1 open, 2 half-open) and ``smg_worker_health`` (1/0), the
in-flight request age gauge ``smg_http_inflight_request_age_count{gt,le}``, the error counter
``smg_router_request_errors_total{error_type}``, and ``smg_worker_selection_total{worker_type,
policy}``, the policy it picked each worker with (:func:`routing_policy`). A series appears once
first observed: absent means "not observed". A source that did not answer is ``known=False`` —
unknown, never healthy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "CB_OPEN",
    "WORKER_SELECTION",
    "RouterMetrics",
    "WorkerLoad",
    "parse_labeled",
    "parse_loads",
    "router_metrics",
    "routing_policy",
]

CB_STATE = "smg_worker_cb_state"
WORKER_HEALTH = "smg_worker_health"
INFLIGHT_AGE = "smg_http_inflight_request_age_count"
REQUEST_ERRORS = "smg_router_request_errors_total"
WORKER_SELECTION = "smg_worker_selection_total"
#: smg 1.13's PD latencies (histograms; 0.3.2 had none in HTTP PD mode): the client's time to
#: first token as the router saw it, and the prefill leg's duration.
PD_TTFT = "smg_pd_ttft_seconds"
PD_PREFILL = "smg_pd_prefill_duration_seconds"
CB_OPEN = 1.0

Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True, slots=True)
class RouterMetrics:
    """What the router's Prometheus port said (``known`` False: it did not answer)."""

    known: bool
    cb_state: Mapping[str, float] = field(default_factory=dict)  # worker url -> state
    health: Mapping[str, float] = field(default_factory=dict)  # worker url -> 1/0
    inflight: float = 0.0  # requests in flight past the smallest age bucket (30 s)
    errors: Mapping[str, float] = field(default_factory=dict)  # error_type -> count
    #: smg's mean PD TTFT and prefill-leg seconds since it started (None: not exposed/observed)
    pd_ttft_s: float | None = None
    pd_prefill_s: float | None = None

    @property
    def open_circuits(self) -> list[str]:
        return sorted(w for w, state in self.cb_state.items() if state == CB_OPEN)

    @property
    def unhealthy(self) -> list[str]:
        return sorted(w for w, up in self.health.items() if up == 0)


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """One worker's load as the router (``/get_loads``) or the engine (``/get_load``) reports it;
    ``load`` None when the source did not answer."""

    service: str
    source: str  # "router" | "engine"
    load: float | None


def _labels(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in text.split('",'):
        key, _, value = part.partition("=")
        if key.strip():
            found[key.strip()] = value.strip().strip('"')
    return found


def parse_labeled(text: str) -> list[Sample]:
    """Prometheus text exposition → ``[(name, labels, value)]`` (junk lines skipped)."""
    samples: list[Sample] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if "{" in line:
            name, _, rest = line.partition("{")
            labels, _, tail = rest.rpartition("}")
        else:
            name, _, tail = line.partition(" ")
            labels = ""
        fields = tail.split()
        try:
            value = float(fields[0]) if fields else None
        except ValueError:
            value = None
        if value is not None and math.isfinite(value):  # NaN or ±Inf: not reported
            samples.append((name.strip(), _labels(labels), value))
    return samples


def router_metrics(text: str | None) -> RouterMetrics:
    """The router's exposition (None: the port did not answer) as :class:`RouterMetrics`."""
    if text is None:
        return RouterMetrics(known=False)
    cb: dict[str, float] = {}
    health: dict[str, float] = {}
    errors: dict[str, float] = {}
    inflight = 0.0
    samples = parse_labeled(text)
    for name, labels, value in samples:
        worker = labels.get("worker", "").rstrip("/")
        if name == CB_STATE and worker:
            cb[worker] = value
        elif name == WORKER_HEALTH and worker:
            health[worker] = value
        elif name == INFLIGHT_AGE:
            inflight += value
        elif name == REQUEST_ERRORS:
            kind = labels.get("error_type", "")
            errors[kind] = errors.get(kind, 0.0) + value
    means = (_mean(samples, PD_TTFT), _mean(samples, PD_PREFILL))
    return RouterMetrics(True, cb, health, inflight, errors, *means)


def _mean(samples: list[Sample], histogram: str) -> float | None:
    """A histogram's mean over every label set (``_sum / _count``); None before an observation."""
    total = sum(v for name, _, v in samples if name == histogram + "_sum")
    count = sum(v for name, _, v in samples if name == histogram + "_count")
    return total / count if count > 0 else None


def _number(value: object) -> float | None:
    """A JSON number as a finite float (None: another type, NaN, ±Infinity or past every float)."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        number = float(value)  # an integer of 400 digits raises OverflowError
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def parse_loads(body: str | None) -> dict[str, float] | None:
    """A router's ``/get_loads`` → {worker url: load}; None when it did not answer.

    Two shapes: sglang-router 0.3.2's ``{"workers": [{"worker", "load"}]}``, and smg 1.13's
    ``{"loads": [{"worker", "worker_type", "dp_rank", "num_running_reqs", ...}], "aggregate"}``
    (one item per data-parallel rank: a worker's running requests summed over its ranks).
    """
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return {}
    shapes = (("workers", "load"), ("loads", "num_running_reqs"))
    loads: dict[str, float] = {}
    for key, field_name in shapes:
        items = data.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("worker"), str):
                load = _number(item.get(field_name))
                if load is not None:
                    url = item["worker"].rstrip("/")
                    loads[url] = loads.get(url, 0.0) + load
    return loads


def routing_policy(text: str, worker_type: str | None = None) -> str | None:
    """The policy the router picked its workers with (of ``worker_type``: ``prefill`` or
    ``decode``; None: either), as its selection counter labels it; None until it has picked one
    (the series appears once first observed) or when two policies disagree."""
    found = {
        labels.get("policy")
        for name, labels, value in parse_labeled(text)
        if name == WORKER_SELECTION and value > 0
        and (worker_type is None or labels.get("worker_type") == worker_type)
    }  # fmt: skip
    found.discard(None)
    return found.pop() if len(found) == 1 else None
