"""Cold or warm: was the e2e probe the first request an engine served since it started?

A freshly started engine pays a warm-up (CUDA graphs, allocator, the KV bootstrap handshake) on
its first request, so a slow first probe after a restart is expected, not a fault. The rule, in
order:

1. **The engines' own counters**: each decode's count of the requests it finished since it
   started, in its ``/metrics`` (SGLang's ``sglang:num_requests_total`` with ``--enable-metrics``,
   vLLM's ``vllm:request_success_total``: :func:`decode_counts`). Every decode at 0 before the
   probe: ``cold`` (:attr:`StartReason.FIRST_SINCE_START`); otherwise ``warm``
   (:attr:`StartReason.SERVED_BEFORE`).
2. **Two probes**: without those counters, a first probe is ``cold`` when it took more than
   :data:`COLD_RATIO` times an immediate second probe *and* at least :data:`COLD_MIN_S` seconds
   longer (:attr:`StartReason.SLOWER_THAN_SECOND`); else ``warm``
   (:attr:`StartReason.SECOND_PROBE`).
3. No counter and no second probe: ``unknown`` (:attr:`StartReason.NO_SECOND_PROBE`).

Pure: the caller scrapes the decodes' ``/metrics`` and times the probes; this module returns a
typed :class:`StartClass` with a :class:`Start` and a :class:`StartReason` and their data. The
sentence is rendered elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.verify.served import engine_count

__all__ = [
    "COLD_MIN_S",
    "COLD_RATIO",
    "Start",
    "StartClass",
    "StartReason",
    "classify_start",
    "decode_counts",
    "needs_second_probe",
]


class Start(StrEnum):
    """Was the probe the first request an engine served since it started?"""

    COLD = "cold"
    WARM = "warm"
    UNKNOWN = "unknown"


class StartReason(StrEnum):
    """Why the start is what it is (the rule above, in order)."""

    FIRST_SINCE_START = "first-since-start"  # every decode's own counter was 0
    SERVED_BEFORE = "served-before"  # some decode had finished requests already
    NO_SECOND_PROBE = "no-second-probe"  # no counter, no second probe to compare with
    SLOWER_THAN_SECOND = "slower-than-second"  # much slower than an immediate second probe
    SECOND_PROBE = "second-probe"  # an immediate second probe took about as long


#: A first probe slower than this many times an immediate second probe may be cold ...
COLD_RATIO = 3.0
#: ... and only when it is also at least this many seconds slower (noise on fast probes).
COLD_MIN_S = 0.5


@dataclass(frozen=True)
class StartClass:
    """``start``, the ``reason`` for it, and its data.

    ``served_before`` is the decodes' summed counters (None without them); ``first_s``/``second_s``
    the probes' total times (``second_s`` None without a second probe); ``ratio`` first/second
    when both were timed.
    """

    start: Start
    reason: StartReason
    served_before: int | None = None
    first_s: float | None = None
    second_s: float | None = None
    ratio: float | None = None


def decode_counts(metrics: Sequence[str | None]) -> tuple[int, ...] | None:
    """Each decode's own count of finished requests, from the text of its ``/metrics`` (None:
    one did not answer, or holds none of the engine's series: rule 1 cannot be used)."""
    counts = [engine_count(text) for text in metrics]
    if not counts or any(c is None for c in counts):
        return None
    return tuple(c for c in counts if c is not None)


def needs_second_probe(before: Sequence[int] | None) -> bool:
    """A second probe is needed without the counter, or when every decode was at 0 (cold)."""
    return before is None or all(count == 0 for count in before)


def classify_start(
    before: Sequence[int] | None,
    first_s: float,
    second_s: float | None,
    *,
    ratio: float = COLD_RATIO,
    min_s: float = COLD_MIN_S,
) -> StartClass:
    """Cold, warm or unknown: the decodes' counters ``before`` first, else the second probe."""
    if before is not None:
        served = sum(before)
        if all(count == 0 for count in before):
            return StartClass(Start.COLD, StartReason.FIRST_SINCE_START, served, first_s, second_s)
        return StartClass(Start.WARM, StartReason.SERVED_BEFORE, served, first_s, second_s)
    if second_s is None:
        return StartClass(Start.UNKNOWN, StartReason.NO_SECOND_PROBE, None, first_s)
    times = first_s / max(second_s, 1e-6)
    if first_s > ratio * second_s and first_s - second_s >= min_s:
        slower = StartReason.SLOWER_THAN_SECOND
        return StartClass(Start.COLD, slower, None, first_s, second_s, times)
    return StartClass(Start.WARM, StartReason.SECOND_PROBE, None, first_s, second_s, times)
