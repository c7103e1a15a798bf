"""The e2e layer's sentences: the chat completion through the entry point (cold or warm, and
why) and each worker reached through the router, by which counter (:mod:`servelab.core.verify.e2e`;
the answer probes' are :mod:`servelab.report.probes`'; no I/O, returns str)."""

from __future__ import annotations

from typing import assert_never

from servelab.core.verify.checks import CheckCode
from servelab.core.verify.coldstart import StartReason
from servelab.core.verify.e2e import E2EProbe, RequestTiming, WorkerReach
from servelab.core.verify.longprompt import LONG_PROMPT_CAP, LongProbe, LongSkip
from servelab.core.verify.served import Gap, Signal
from servelab.report.route import route_text

__all__ = ["describe_e2e", "describe_reach"]

_C = CheckCode


def _request_failure(timing: RequestTiming | None) -> str:
    """Why one e2e request failed: its error (``HTTP 500``, ``idle timeout``...) and what came with
    it, else that the stream held no content token."""
    if timing is None or timing.error is None:
        return "no content tokens in the stream"
    snippet = timing.error_detail or ""
    return timing.error.replace("http ", "HTTP ", 1) + (f": {snippet}" if snippet else "")


def describe_e2e(code: CheckCode, data: E2EProbe) -> str:
    """``e2e.passed``/``failed``/``second_failed``/``long_failed``'s reason: the probe's timings,
    cold or warm and why, the long prompt's, its path; or why it failed."""
    if code is _C.E2E_FAILED:
        return f"chat completion failed: {_request_failure(data.first)}"
    if code is _C.E2E_SECOND_FAILED:
        return "first request ok, the second failed: " + _request_failure(data.second)
    if code is _C.E2E_LONG_FAILED and data.long is not None:
        return _long_failed(data.long)
    text = (
        f"{data.status} in {data.total_s:.2f} s, TTFT {data.ttft_s or 0:.2f} s, "
        f"{data.completion_tokens} tokens; {data.start} ({_start_reason(data)})"
    )
    if data.second is not None:
        text += f"; second probe {data.second.total_s:.2f} s"
    if data.long is not None:
        text += f"; {_long_passed(data.long)}"
    return text + ("" if data.path is None else f"; path: {route_text(data.path)}")


def _sized_from(long: LongProbe) -> str:
    """Where the long prompt's size came from: the limit it was sized from, or the cap."""
    read = [limit for limit in long.limits if limit.tokens is not None]
    if not read:
        return "no limit read"
    least = min(read, key=lambda limit: limit.tokens or 0)
    capped = long.size == LONG_PROMPT_CAP
    source = f"{least.service}'s {least.field} {least.tokens:,}"
    return f"capped at {LONG_PROMPT_CAP:,}; {source}" if capped else f"sized from {source}"


def _long_passed(long: LongProbe) -> str:
    """The long prompt's timing, or why none was sent."""
    match long.skipped:
        case LongSkip.NO_LIMIT:
            asked = ", ".join(f"{limit.service} {limit.field}" for limit in long.limits)
            return f"long prompt skipped: no worker said its input limit ({asked or 'none asked'})"
        case LongSkip.NOT_LONGER:
            return f"long prompt skipped: the input limit ({_sized_from(long)}) is not longer"
        case None:
            return (
                f"long prompt {long.prompt_tokens or long.size:,} tokens ({_sized_from(long)}) "
                f"{long.total_s or 0:.2f} s, TTFT {long.ttft_s or 0:.2f} s"
            )
        case _:
            assert_never(long.skipped)


def _long_failed(long: LongProbe) -> str:
    """Why the long prompt failed: its size, where the size came from, its status and error."""
    timing = RequestTiming(long.status, long.ttft_s, long.total_s or 0.0,
                           long.completion_tokens or 0, long.prompt_tokens or 0, long.error,
                           long.error_detail)  # fmt: skip
    status = "no status" if long.status is None else f"status {long.status}"
    refused = long.status is not None and 400 <= long.status < 500
    cause = (  # a 4xx: refused on the way in (a proxy's body limit); else past it
        "the entry point refuses long prompts (a body limit in a proxy in front?)" if refused
        else "the KV transfer of long prompts fails (transfer buffers smaller than the longest "
        "prompt the engines admit?)"
    )  # fmt: skip
    return (
        f"short prompts ok, a long prompt of {long.size or 0:,} tokens ({_sized_from(long)}) "
        f"failed ({status}): {_request_failure(timing)}; {cause}"
    )


def _start_reason(data: E2EProbe) -> str:
    """Why the first request counts as cold or warm (:mod:`servelab.core.verify.coldstart`),
    with the timings it was judged on."""
    second_s = data.second.total_s if data.second is not None else 0.0
    match data.start_reason:
        case StartReason.FIRST_SINCE_START:
            return "first request since the decode started"
        case StartReason.SERVED_BEFORE:
            before = data.decode_requests_before
            served = sum(before) if before is not None else "some"
            return f"decode served {served} request(s) before"
        case StartReason.NO_SECOND_PROBE:
            return "no second probe to compare with"
        case StartReason.SLOWER_THAN_SECOND:
            times = data.total_s / max(second_s, 1e-6)
            return f"{times:.1f}x slower than an immediate second probe"
        case StartReason.SECOND_PROBE:
            return f"an immediate second probe took {second_s:.2f} s"
        case None:
            return "no reason recorded"
        case _:
            assert_never(data.start_reason)


def _gap(gap: Gap | None) -> str:
    """Why a worker's requests could not be counted (:class:`Gap`; None: an older row's)."""
    match gap:
        case Gap.NO_METRICS:
            return (
                "its /metrics did not answer (SGLang serves it only with --enable-metrics) and "
                "the router's per-worker counter could not be read"
            )
        case Gap.NO_ENGINE_SERIES:
            return (
                "its /metrics has none of the engine's series (vLLM: --disable-log-stats) and "
                "the router's per-worker counter could not be read"
            )
        case None:
            return "no served-request counter (not a servelab sim)"
        case _:
            assert_never(gap)


def _counter(data: WorkerReach) -> str:
    """The counter a reach was read by: its name and whose (an older row: "served requests")."""
    match data.signal:
        case Signal.ENGINE:
            return f"its {data.counter}"
        case Signal.ROUTER:
            return f"the router's {data.counter}"
        case None:
            return "served requests"
        case _:
            assert_never(data.signal)


def describe_reach(code: CheckCode, data: WorkerReach) -> str:
    """``e2e.worker_*``'s reason: the worker's counter before and after the requests sent
    through the router, or why it could not be counted."""
    if code is _C.E2E_WORKER_UNCOUNTED:
        unknown = "not proven" if data.gap is None else "unknown"
        return (
            f"{unknown}: {_gap(data.gap)}; {data.requests_sent} request(s) went through {data.via}"
        )
    if code is _C.E2E_WORKER_UNREACHED:
        return (
            f"not reached through {data.via}: {_counter(data)} stayed at {data.served_before} over "
            f"{data.requests_sent} request(s) (HTTP {', '.join(str(s) for s in data.statuses)})"
        )
    return (
        f"reached through {data.via}: {_counter(data)} {data.served_before} -> "
        f"{data.served_after} after {data.requests_sent} request(s)"
    )
