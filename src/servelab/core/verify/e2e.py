"""The e2e layer's data (pure): the streaming chat completion through the entry point, its requests'
timings, and (xPyD) each worker reached through the router, counted by a real counter
(:mod:`servelab.core.verify.served`). Its codes are :class:`servelab.core.verify.checks.CheckCode`'s
``e2e.*`` members (the answer probes' data is :mod:`servelab.core.verify.answers`'); the words are
:mod:`servelab.report.e2e`'s."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.ledger.codec import Omitted
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.redacted import StoredText
from servelab.core.verify.coldstart import Start, StartReason
from servelab.core.verify.longprompt import LongProbe
from servelab.core.verify.served import Gap, Signal

__all__ = ["E2EProbe", "RequestTiming", "WorkerReach"]


@dataclass(frozen=True)
class RequestTiming:
    """One streamed request: status, TTFT, total time, tokens, and why it failed (``error``: a
    reason of :mod:`servelab.core.load.records`; ``error_detail``: the first 200 characters of what
    came with it)."""

    status: int | None
    ttft_s: float | None
    total_s: float
    completion_tokens: int
    prompt_tokens: int
    error: str | None
    error_detail: Omitted[str] = None


@dataclass(frozen=True)
class E2EProbe:
    """``e2e.passed``, ``e2e.failed``, ``e2e.second_failed``, ``e2e.long_failed``: the chat
    completion through the entry point (its :class:`RequestTiming` inline), the decodes' own
    counters of finished requests before it (None: they could not be read), the second probe when
    one was sent, cold or warm and why; ``path``: how it went (None: straight, no proxy variable
    set); ``long``: the long prompt (:mod:`servelab.core.verify.longprompt`; None: an older row,
    or the first probes failed before it).
    ``model`` is the entry point's (``/v1/models``), encoded with a token in it masked."""

    model: StoredText
    status: int | None
    ttft_s: float | None
    total_s: float
    completion_tokens: int
    prompt_tokens: int
    error: str | None
    error_detail: Omitted[str] = None
    decode_requests_before: tuple[int, ...] | None = None
    second: Omitted[RequestTiming] = None
    start: Omitted[Start] = None
    start_reason: Omitted[StartReason] = None
    path: Omitted[ProxyRoute] = None
    long: Omitted[LongProbe] = None

    @classmethod
    def of(cls, model: str, first: RequestTiming, before: tuple[int, ...] | None) -> E2EProbe:
        """The probe whose first request is ``first``."""
        return cls(
            model, first.status, first.ttft_s, first.total_s, first.completion_tokens,
            first.prompt_tokens, first.error, first.error_detail, before,
        )  # fmt: skip

    @property
    def first(self) -> RequestTiming:
        return RequestTiming(
            self.status, self.ttft_s, self.total_s, self.completion_tokens, self.prompt_tokens,
            self.error, self.error_detail,
        )  # fmt: skip


@dataclass(frozen=True)
class WorkerReach:
    """``e2e.worker_reached``, ``…unreached``, ``…uncounted`` (xPyD): a real counter of the
    worker's requests (``counter``, read by ``signal``: its own ``/metrics`` or the router's
    per-worker counter, :mod:`servelab.core.verify.served`) before and after ``requests_sent``
    small requests through ``via`` (the router), and the statuses they got. Uncounted: ``gap``
    says why no counter could be read (an older ledger's row has none: it was "not a servelab
    sim")."""

    role: str
    via: str
    served_before: int | None
    served_after: int | None
    requests_sent: int
    statuses: tuple[int | None, ...]
    signal: Omitted[Signal] = None
    counter: Omitted[str] = None
    gap: Omitted[Gap] = None
