"""What one streamed request received, and the connections it went over (plain records of
:mod:`servelab.io.http.stream`, which fills them and re-exports them)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from servelab.core.load.records import RequestRecord

__all__ = ["Chunks", "Connections", "Resend", "Transfer"]

#: A request's stamped body reads: ``(perf_counter_ns at the read, bytes)``.
Chunks = list[tuple[int, bytes]]


@dataclass
class Connections:
    """The connections a client opened: how many, when the current one opened
    (``time.monotonic()``), how many requests it carried, the one in flight included, and how
    long it sat idle before the one in flight (0 on a new connection).
    """

    opened: int = 0
    opened_at: float = field(default_factory=time.monotonic)
    requests: int = 0
    idle_s: float = 0.0

    @property
    def carried(self) -> int:
        """Requests the current connection carried before the one in flight."""
        return max(self.requests - 1, 0)

    def age_s(self) -> float:
        return time.monotonic() - self.opened_at

    def created(self) -> None:
        """A request went out on a new connection."""
        self.opened, self.opened_at, self.requests = self.opened + 1, time.monotonic(), 1
        self.idle_s = 0.0

    def reused(self, idle_s: float) -> None:
        """A request went out on a kept-alive connection, idle ``idle_s`` seconds before."""
        self.requests += 1
        self.idle_s = idle_s


@dataclass(frozen=True, slots=True)
class Resend:
    """A request the client sent again, the connection idle ``idle_s`` seconds before it: the
    server had closed the kept-alive one, found closed before the send (``before_send``) or
    closed before any byte of the answer (then the request went out twice); or (``status``) a
    client that retries sent it again after an answer with that HTTP status."""

    idle_s: float
    before_send: bool
    status: int | None = None


@dataclass
class Transfer:
    """What one streamed request received, left undecoded: the stamped body reads, or the
    (truncated) body of an HTTP error answer. The record holds status, stamps and failures."""

    record: RequestRecord
    chunks: Chunks = field(default_factory=list)
    error_body: bytes = b""
    #: the answer's head (names lower-cased; empty: no head came)
    headers: dict[str, str] = field(default_factory=dict)
    resends: list[Resend] = field(default_factory=list)

    @property
    def received_bytes(self) -> int:
        return len(self.error_body) + sum(len(data) for _, data in self.chunks)

    @property
    def phase(self) -> str:
        """``"head"`` while no response head arrived, then ``"body"``."""
        return "head" if self.record.first_byte_ns is None else "body"
