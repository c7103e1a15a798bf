"""Server spans joined to client records: where one request's time to first token went (pure).

The join, as the real routers allow it (``../shared/notes/telemetry.md``, ``tests/contracts/``):
every request carries its own ``x-request-id`` and W3C ``traceparent``
(:func:`servelab.core.load.identity.request_identity`: a trace id per request). vllm-router
0.1.17, and sglang-router 0.3.2 when it does not trace itself, forward that ``traceparent``
unchanged to both workers, whose spans are its children: a request's spans are the spans of its
own trace (:func:`~servelab.core.load.identity.trace_of`). A
sglang-router that traces itself (``--enable-trace``) starts its own trace and hands the workers
its ``traceparent`` instead; its ``http_request`` span names the client's ``x-request-id``, so the
spans of that trace are the request's too (when the router exported that span: 0.3.2 leaves some
out, one in fifty here, and those requests are then untraced). Which spans say what:
:mod:`servelab.core.telemetry.spans`.

Client times are ``perf_counter_ns`` values; spans carry Unix epoch nanoseconds. A
:class:`ClockAnchor` (one reading of both clocks, taken by the client) maps one onto the other.

The time to first token decomposes into consecutive phases, each measured between the client's
and the servers' own timestamps (:class:`~servelab.core.telemetry.spans.WorkerMarks`, never
estimated):

- ``dispatch``: scheduled send → actual send (the client's own lateness);
- ``router``: send → the prefill's arrival (connection, router, forwarding), plus, when the
  decode leg reached the decode only after the prefill had ended, that delay (forwarding too:
  vllm-router sends the decode leg once the prefill answered);
- ``prefill_queue``: the prefill's arrival → its compute starts (SGLang: the root span's start →
  ``prefill_forward``; vLLM: ``time_to_first_token − time_in_model_prefill`` of its span);
- ``prefill``: its compute → the prefill's end (SGLang: ``prefill_forward``; vLLM: to the end of
  the prefill's ``llm_request`` span);
- ``kv_transfer``: the later of the decode leg's arrival and the prefill's end → the KV is in
  (SGLang: the end of ``decode_transferred``, a cold engine's warm-up included; vLLM: the
  decode's ``time_to_first_token − time_in_model_prefill``: its wait for the remote KV and its
  queue);
- ``first_decode_step``: the KV is in → the first token is out of the decode (SGLang: the end of
  ``fake_output``; vLLM: the decode's ``time_in_model_prefill``);
- ``return``: that first token → the client's first content byte (the way back: the decode →
  router → client legs; sglang-router 0.3.2 leaves Nagle on its client connections, so on a
  kept-alive connection this holds the client's delayed ACK, ≥ 40 ms: ``RETURN_HELD_MS``).

A request with no server span, or without a span a phase needs, is *untraced* (None), never
zero. The phases tile the interval from the scheduled send to the first content byte, so
:attr:`TtftBreakdown.gap_ns` (TTFT − their sum) is zero; it is kept, and checked. What the join
must get right is the two clocks: a phase between a client and a worker timestamp (``router``,
``return``) comes out negative when they disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field, computed_field

from servelab.core.load.identity import trace_of
from servelab.core.load.metrics import ttft_ns
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.spans import (
    ROUTER_SPAN,
    WORKER_PHASES,
    Span,
    phases_seen,
    worker_marks,
)

__all__ = [
    "PHASES",
    "RETURN_HELD_MS",
    "ClockAnchor",
    "PhaseQuantiles",
    "RequestPhases",
    "RunTraces",
    "TraceSummary",
    "TtftBreakdown",
    "decompose",
    "join_records",
    "phase_percentiles",
    "phases_so_far",
    "spans_by_request",
    "summarize_traces",
    "traced",
]

#: The TTFT's phases, in the order a PD request goes through them.
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


@dataclass(frozen=True)
class ClockAnchor:
    """One simultaneous reading of the client's ``perf_counter_ns`` and ``time_ns``."""

    mono_ns: int
    wall_ns: int

    def to_wall(self, mono_ns: int) -> int:
        return self.wall_ns + (mono_ns - self.mono_ns)


def spans_by_request(spans: Iterable[Span], request_ids: Iterable[str]) -> dict[str, list[Span]]:
    """Each of ``request_ids`` → its spans: those of its own trace, and those of the trace a
    router span naming it started (none: an empty list)."""
    spans = list(spans)
    traces: dict[str, set[str]] = {}
    for rid in request_ids:
        own = trace_of(rid)
        traces[rid] = set() if own is None else {own}
    for s in spans:
        named = s.request_id
        if named is not None and named in traces:
            traces[named].add(s.trace_id)
    by_trace: dict[str, list[Span]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    return {
        rid: [s for t in sorted(ids) for s in by_trace.get(t, [])] for rid, ids in traces.items()
    }


@dataclass(frozen=True)
class TtftBreakdown:
    """One request's TTFT in phases (ns, PHASES order); ``gap_ns`` = TTFT − their sum."""

    request_id: str
    ttft_ns: int
    phases: Mapping[str, int]
    router_span_ns: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gap_ns(self) -> int:
        return self.ttft_ns - sum(self.phases.values())


def decompose(
    request_id: str,
    scheduled_ns: int,
    sent_ns: int,
    first_content_ns: int,
    anchor: ClockAnchor,
    spans: Sequence[Span],
) -> TtftBreakdown | None:
    """The phases of one request's TTFT (client times in ``perf_counter_ns``) from its spans;
    None when a span a phase needs did not arrive (untraced)."""
    m = worker_marks(spans)
    if m is None:
        return None
    sent_w, first_w = anchor.to_wall(sent_ns), anchor.to_wall(first_content_ns)
    # a decode leg that reached the decode after the prefill had ended spent that time being
    # forwarded: it counts as router time, not as a gap
    late_decode = max(m.decode_start - m.prefill_end, 0)
    phases = {
        "dispatch": sent_ns - scheduled_ns,
        "router": m.prefill_start - sent_w + late_decode,
        "prefill_queue": m.compute_start - m.prefill_start,
        "prefill": m.prefill_end - m.compute_start,
        # an SGLang decode waits for its room while the prefill computes: its transfer counts
        # from the later of its own arrival and the prefill's end
        "kv_transfer": m.kv_in - max(m.decode_start, m.prefill_end),
        "first_decode_step": m.first_token - m.kv_in,
        "return": first_w - m.first_token,
    }
    router = sorted((s for s in spans if s.name == ROUTER_SPAN), key=lambda s: s.start_ns)
    router_ns = router[0].end_ns - router[0].start_ns if router else None
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


@dataclass(frozen=True)
class PhaseQuantiles:
    """One phase's p50/p90/p99 over the traced requests (ms, linear interpolation)."""

    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class TraceSummary:
    """Where the TTFT went, over a set of requests: ``phases`` holds every name of
    :data:`PHASES` and ``gap`` (TTFT − the phases' sum). ``n_untraced`` requests had no server
    span (or a phase missing): they are counted, never taken as zero."""

    n_requests: int
    n_traced: int
    n_routed: int
    #: stored and printed as ``phases_ms``
    phases: Annotated[Mapping[str, PhaseQuantiles], Field(alias="phases_ms")]
    max_abs_gap_ms: float | None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_untraced(self) -> int:
        return self.n_requests - self.n_traced


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
    (never in its encoding), so one decoded from a summary has none."""

    anchor: ClockAnchor
    breakdowns: tuple[TtftBreakdown, ...]
    untraced: tuple[str, ...]
    n_spans: int
    complete: bool
    spans: Annotated[tuple[Span, ...], Field(exclude=True)] = field(
        default=(), compare=False, repr=False
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> TraceSummary:
        """The join's summary: written with the join, ignored when read back."""
        return summarize_traces(self.breakdowns, len(self.breakdowns) + len(self.untraced))


def traced(spans: Sequence[Span]) -> bool:
    """Whether ``spans`` (one request's) hold every worker span its TTFT needs."""
    return worker_marks(spans) is not None


def join_records(
    records: Sequence[RequestRecord], anchor: ClockAnchor, spans: Sequence[Span], complete: bool
) -> RunTraces:
    """Join every successful record that has a request id (and a first token) to its spans."""
    timed = [(r, t) for r in records if r.ok and r.request_id and (t := ttft_ns(r)) is not None]
    by_request = spans_by_request(spans, [r.request_id for r, _ in timed])
    breakdowns, untraced = [], []
    for r, ttft in timed:
        mine = by_request[r.request_id]
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


def phases_so_far(
    request_id: str, session: int, rnd: int, outcome: str, spans: Sequence[Span]
) -> RequestPhases:
    """The worker phases whose spans are among ``spans`` (one request's,
    :func:`spans_by_request`; :func:`servelab.core.telemetry.spans.phases_seen`)."""
    return RequestPhases(request_id, session, rnd, outcome, phases_seen(spans), len(spans))
