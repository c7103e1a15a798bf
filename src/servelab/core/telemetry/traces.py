"""Server spans joined to client records: where one request's time to first token went (pure).

The join, as the real sglang-router 0.3.2 allows it (``../shared/notes/telemetry.md``): the client
sends its own ``x-request-id``; the router forwards it to both workers, which put it on their spans
as the ``servelab.request_id`` attribute; the router starts its own trace and passes its
``traceparent`` to the workers, so their spans are children of the router's ``http_request`` span
and share its trace id. A request's spans are therefore: the worker spans carrying its request id,
and the router span of the same trace.

Client times are ``perf_counter_ns`` values; spans carry Unix epoch nanoseconds. A
:class:`ClockAnchor` (one reading of both clocks, taken by the client) maps one onto the other.

The time to first token decomposes into consecutive phases, each measured between the client's
and the servers' own timestamps (never estimated):

- ``dispatch``: scheduled send → actual send (the client's own lateness);
- ``router``: send → the prefill's first span (connection, router, forwarding), plus, when the
  decode leg reached the decode only after the prefill had ended, that delay (forwarding too);
- ``prefill_queue``, ``prefill``: the prefill's queue and compute spans;
- ``kv_transfer``: the decode's bootstrap and KV-transfer span, from the prefill's end (the decode
  leg arrives at once and waits for the room while the prefill computes);
- ``first_decode_step``: the KV is in → the decode wrote the first token (a cold engine's warm-up
  is in ``kv_transfer``, where the simulated and the real engine both pay it);
- ``return``: the first token's write → the client's first content byte (the way back: the
  decode → router → client legs; sglang-router 0.3.2 leaves Nagle on its client connections, so
  on a kept-alive connection this holds the client's delayed ACK, ≥ 40 ms: ``RETURN_HELD_MS``).

A request with no server span is *untraced* (None), never zero. The phases tile the interval from
the scheduled send to the first content byte, so :attr:`TtftBreakdown.gap_ns` (TTFT − their sum)
is zero for spans of the shape the simulated workers export; it is kept, and checked, so a span
of another shape shows up as a gap instead of vanishing. What the join must get right is the two
clocks: a phase between a client and a worker timestamp (``router``, ``return``) comes out
negative when they disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servelab.core.load.metrics import ttft_ns
from servelab.core.load.records import RequestRecord

__all__ = [
    "PHASES",
    "REQUEST_ID_ATTR",
    "RETURN_HELD_MS",
    "WORKER_PHASES",
    "ClockAnchor",
    "PhaseQuantiles",
    "RequestPhases",
    "RunTraces",
    "Span",
    "TraceSummary",
    "TtftBreakdown",
    "decompose",
    "join_records",
    "phase_percentiles",
    "phases_so_far",
    "request_identity",
    "spans_by_request",
    "summarize_traces",
    "traced",
]

#: The span attribute the simulated workers put the client's ``x-request-id`` in.
REQUEST_ID_ATTR = "servelab.request_id"

#: The worker span names, in the order a PD request goes through them.
PHASES = (
    "dispatch",
    "router",
    "prefill_queue",
    "prefill",
    "kv_transfer",
    "first_decode_step",
    "return",
)
#: A ``return`` median at least this long is a Nagle-held chunk, not a slow path: Linux's delayed
#: ACK is at least 40 ms, a path without Nagle returns the first token in well under 1 ms
#: (tests/io/http/test_tcp_nodelay.py measured 45 ms against 0.2 ms through sglang-router 0.3.2).
RETURN_HELD_MS = 30.0

_SERVER_SPANS = ("prefill_queue", "prefill", "kv_transfer", "first_decode_step")
#: Every span a PD request's workers export, in the order the request goes through them (the
#: simulated workers' names, :mod:`servelab.sim.tracing`): ``decode`` is the steps after the first.
WORKER_PHASES = (*_SERVER_SPANS, "decode")
_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class Span:
    """One OpenTelemetry span as received (ids as hex, times in Unix epoch nanoseconds)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    service: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def request_id(self) -> str | None:
        value = self.attributes.get(REQUEST_ID_ATTR)
        return None if value is None else str(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_id": self.parent_id,
            "name": self.name,
            "service": self.service,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "attributes": dict(self.attributes),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Span:
        return cls(
            str(doc["trace_id"]), str(doc["span_id"]), str(doc.get("parent_id", "")),
            str(doc["name"]), str(doc.get("service", "")), int(doc["start_ns"]),
            int(doc["end_ns"]), dict(doc.get("attributes") or {}),
        )  # fmt: skip


@dataclass(frozen=True)
class ClockAnchor:
    """One simultaneous reading of the client's ``perf_counter_ns`` and ``time_ns``."""

    mono_ns: int
    wall_ns: int

    def to_wall(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)


def spans_by_request(spans: Iterable[Span]) -> dict[str, list[Span]]:
    """Request id → its worker spans and the router spans of the same traces."""
    spans = list(spans)
    by_id: dict[str, list[Span]] = {}
    traces: dict[str, set[str]] = {}
    for s in spans:
        rid = s.request_id
        if rid is not None:
            by_id.setdefault(rid, []).append(s)
            traces.setdefault(rid, set()).add(s.trace_id)
    for s in spans:
        if s.request_id is None:
            for rid, ids in traces.items():
                if s.trace_id in ids:
                    by_id[rid].append(s)
    return by_id


@dataclass(frozen=True)
class TtftBreakdown:
    """One request's TTFT in phases (ns, PHASES order); ``gap_ns`` = TTFT − their sum."""

    request_id: str
    ttft_ns: int
    phases: Mapping[str, int]
    router_span_ns: int | None = None

    @property
    def gap_ns(self) -> int:
        return self.ttft_ns - sum(self.phases.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "ttft_ns": self.ttft_ns,
            "phases": dict(self.phases),
            "gap_ns": self.gap_ns,
            "router_span_ns": self.router_span_ns,
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TtftBreakdown:
        router = doc.get("router_span_ns")
        phases = {str(k): int(v) for k, v in dict(doc["phases"]).items()}
        return cls(
            str(doc["request_id"]),
            int(doc["ttft_ns"]),
            phases,
            None if router is None else int(router),
        )


def _first(spans: Sequence[Span], name: str) -> Span | None:
    hits = sorted((s for s in spans if s.name == name), key=lambda s: s.start_ns)
    return hits[0] if hits else None


def decompose(
    request_id: str,
    scheduled_ns: int,
    sent_ns: int,
    first_content_ns: int,
    anchor: ClockAnchor,
    spans: Sequence[Span],
) -> TtftBreakdown | None:
    """The phases of one request's TTFT (client times in ``perf_counter_ns``); None when no
    worker span of the request arrived (untraced) or a phase is missing."""
    found = {name: _first(spans, name) for name in _SERVER_SPANS}
    if any(s is None for s in found.values()):
        return None
    sp = {k: v for k, v in found.items() if v is not None}
    sent_w, first_w = anchor.to_wall(sent_ns), anchor.to_wall(first_content_ns)
    kv_start = sp["kv_transfer"].start_ns
    # a decode leg that reached the decode after the prefill had ended spent that time being
    # forwarded: it counts as router time, not as a gap
    late_decode = max(kv_start - sp["prefill"].end_ns, 0)
    phases = {
        "dispatch": sent_ns - scheduled_ns,
        "router": sp["prefill_queue"].start_ns - sent_w + late_decode,
        "prefill_queue": sp["prefill_queue"].end_ns - sp["prefill_queue"].start_ns,
        "prefill": sp["prefill"].end_ns - sp["prefill"].start_ns,
        # the decode waits for the room while the prefill runs: its transfer counts from the
        # later of its own start and the prefill's end
        "kv_transfer": sp["kv_transfer"].end_ns - max(kv_start, sp["prefill"].end_ns),
        "first_decode_step": sp["first_decode_step"].end_ns - sp["first_decode_step"].start_ns,
        "return": first_w - sp["first_decode_step"].end_ns,
    }  # fmt: skip
    router = _first(spans, "http_request")
    router_ns = None if router is None else router.end_ns - router.start_ns
    return TtftBreakdown(request_id, first_content_ns - scheduled_ns, phases, router_ns)


def _percentile(values: Sequence[int], q: float) -> float:
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def phase_percentiles(
    breakdowns: Sequence[TtftBreakdown], qs: Sequence[float] = (0.5, 0.9, 0.99)
) -> dict[str, dict[str, float]]:
    """Per phase (and ``gap``): ``{"p50": ms, ...}`` over the traced requests (linear interp.)."""
    if not breakdowns:
        return {}
    columns: dict[str, list[int]] = {p: [b.phases[p] for b in breakdowns] for p in PHASES}
    columns["gap"] = [b.gap_ns for b in breakdowns]
    return {
        name: {f"p{round(q * 100)}": _percentile(vals, q) / 1e6 for q in qs}
        for name, vals in columns.items()
    }


def request_identity(tag: str, index: int) -> tuple[str, str]:
    """The ``x-request-id`` and W3C ``traceparent`` of request ``index`` of one run part.

    ``tag`` is 16 lowercase hex digits, fresh per run part (the caller draws it): the request id
    is ``servelab-<tag>-<index>``, the trace id ``<tag><index as 16 hex digits>`` (unique per
    request, never all zeros), the parent span id ``index + 1`` (never zero), sampled. No
    randomness per request: two string formats, so the identity costs nothing per token.
    """
    i = index & _U64  # a negative index still gives 16 hex digits
    return f"servelab-{tag}-{index}", f"00-{tag}{i:016x}-{(i + 1) & _U64 or 1:016x}-01"


@dataclass(frozen=True)
class PhaseQuantiles:
    """One phase's p50/p90/p99 over the traced requests (ms, linear interpolation)."""

    p50: float
    p90: float
    p99: float

    def to_json(self) -> dict[str, float]:
        return {"p50": self.p50, "p90": self.p90, "p99": self.p99}


@dataclass(frozen=True)
class TraceSummary:
    """Where the TTFT went, over a set of requests: ``phases`` holds every name of
    :data:`PHASES` and ``gap`` (TTFT − the phases' sum). ``n_untraced`` requests had no server
    span (or a phase missing): they are counted, never taken as zero."""

    n_requests: int
    n_traced: int
    n_routed: int
    phases: Mapping[str, PhaseQuantiles]
    max_abs_gap_ms: float | None

    @property
    def n_untraced(self) -> int:
        return self.n_requests - self.n_traced

    def to_json(self) -> dict[str, Any]:
        return {
            "n_requests": self.n_requests,
            "n_traced": self.n_traced,
            "n_untraced": self.n_untraced,
            "n_routed": self.n_routed,
            "max_abs_gap_ms": self.max_abs_gap_ms,
            "phases_ms": {name: q.to_json() for name, q in self.phases.items()},
        }


def summarize_traces(breakdowns: Sequence[TtftBreakdown], n_requests: int) -> TraceSummary:
    """The per-phase percentiles of ``breakdowns`` out of ``n_requests`` requests."""
    table = phase_percentiles(breakdowns)
    phases = {name: PhaseQuantiles(q["p50"], q["p90"], q["p99"]) for name, q in table.items()}
    gaps = [abs(b.gap_ns) / 1e6 for b in breakdowns]
    return TraceSummary(
        n_requests=n_requests,
        n_traced=len(breakdowns),
        n_routed=sum(b.router_span_ns is not None for b in breakdowns),
        phases=phases,
        max_abs_gap_ms=max(gaps) if gaps else None,
    )


@dataclass(frozen=True)
class RunTraces:
    """One run's join: a breakdown per traced request, the ids of the untraced ones, how many
    spans arrived, and whether the wait for late spans ended because every request was seen.
    ``spans`` are the spans themselves, as received: the ledger stores them in their own rows
    (not in :meth:`to_json`), so one read back from a summary has none."""

    anchor: ClockAnchor
    breakdowns: tuple[TtftBreakdown, ...]
    untraced: tuple[str, ...]
    n_spans: int
    complete: bool
    spans: tuple[Span, ...] = field(default=(), compare=False, repr=False)

    @property
    def summary(self) -> TraceSummary:
        return summarize_traces(self.breakdowns, len(self.breakdowns) + len(self.untraced))

    def to_json(self) -> dict[str, Any]:
        return {
            "anchor": {"mono_ns": self.anchor.mono_ns, "wall_ns": self.anchor.wall_ns},
            "n_spans": self.n_spans,
            "complete": self.complete,
            "summary": self.summary.to_json(),
            "untraced": list(self.untraced),
            "breakdowns": [b.to_json() for b in self.breakdowns],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> RunTraces:
        anchor = doc["anchor"]
        return cls(
            ClockAnchor(int(anchor["mono_ns"]), int(anchor["wall_ns"])),
            tuple(TtftBreakdown.from_json(b) for b in doc.get("breakdowns") or []),
            tuple(str(r) for r in doc.get("untraced") or []),
            int(doc.get("n_spans", 0)),
            bool(doc.get("complete", False)),
        )


def traced(spans: Sequence[Span]) -> bool:
    """Whether ``spans`` (the record's own) hold every worker phase its TTFT needs."""
    return set(_SERVER_SPANS) <= {s.name for s in spans}


def join_records(
    records: Sequence[RequestRecord], anchor: ClockAnchor, spans: Sequence[Span], complete: bool
) -> RunTraces:
    """Join every successful record that has a request id to its spans."""
    by_request = spans_by_request(spans)
    breakdowns, untraced = [], []
    for r in records:
        ttft = ttft_ns(r) if r.ok and r.request_id else None
        if ttft is None:
            continue
        mine = by_request.get(r.request_id, [])
        b = decompose(r.request_id, r.scheduled_ns, r.sent_ns, r.scheduled_ns + ttft, anchor, mine)
        if b is None:
            untraced.append(r.request_id)
        else:
            breakdowns.append(b)
    return RunTraces(anchor, tuple(breakdowns), tuple(untraced), len(spans), complete, tuple(spans))


@dataclass(frozen=True)
class RequestPhases:
    """How far one failed or stalled request got, by the worker spans that came back for it:
    ``seen`` the worker phases received (:data:`WORKER_PHASES` order), ``n_spans`` every span of
    its (worker spans and the router's of the same trace). ``session``/``round`` say which
    request it was (-1: the soak's probe); ``outcome`` is ``stalled`` or ``error``."""

    request_id: str
    session: int
    round: int
    outcome: str
    seen: tuple[str, ...]
    n_spans: int

    @property
    def last(self) -> str | None:
        """The furthest worker phase received (None: no worker span came back)."""
        return self.seen[-1] if self.seen else None

    @property
    def first_missing(self) -> str | None:
        """The phase after the furthest one received, the first whose span did not come: the
        request stopped in or after :attr:`last` and this phase never ended (None: no worker
        span came back, or every phase's did)."""
        if not self.seen:
            return None
        after = WORKER_PHASES.index(self.seen[-1]) + 1
        return WORKER_PHASES[after] if after < len(WORKER_PHASES) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "session": self.session,
            "round": self.round,
            "outcome": self.outcome,
            "seen": list(self.seen),
            "n_spans": self.n_spans,
            "last": self.last,
            "first_missing": self.first_missing,
        }


def phases_so_far(
    request_id: str, session: int, rnd: int, outcome: str, spans: Sequence[Span]
) -> RequestPhases:
    """The worker phases among ``spans`` (one request's, :func:`spans_by_request`)."""
    names = {s.name for s in spans}
    seen = tuple(p for p in WORKER_PHASES if p in names)
    return RequestPhases(request_id, session, rnd, outcome, seen, len(spans))
