"""The soak's sessions while they run: each one's tally, and what their requests measured
together (the decode rate a non-streamed replay's deadline comes from, the uncached prefill the
rounds reached)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from servelab.core.load.cache import cache_summary
from servelab.core.load.records import RequestRecord
from servelab.core.soak.clock import DecodeRate, measured_rate
from servelab.core.soak.fresh import UncachedPrefill, uncached_prefill
from servelab.core.soak.result import SessionOutcome

__all__ = ["SessionTally", "decode_rate", "uncached"]


@dataclass
class SessionTally:
    """One session's tally while it runs (a :class:`SessionOutcome` once the soak ends)."""

    session: int
    rounds_done: int = 0
    requests: int = 0
    connections: int = 0
    stalled: bool = False
    error: str | None = None
    records: list[RequestRecord] = field(default_factory=list)  # its rounds' requests

    def outcome(self) -> SessionOutcome:
        return SessionOutcome(
            self.session, self.rounds_done, self.requests, self.connections, self.stalled,
            self.error, cache_summary(self.records), cache_summary(self.records[1:]),
        )  # fmt: skip


def _records(sessions: Sequence[SessionTally]) -> Iterable[RequestRecord]:
    return (r for s in sessions for r in s.records)


def decode_rate(sessions: Sequence[SessionTally]) -> DecodeRate | None:
    """The decode rate the sessions' successful streams measured (None: none did)."""
    return measured_rate(_records(sessions))


def uncached(sessions: Sequence[SessionTally]) -> UncachedPrefill:
    """The uncached prefill the sessions' requests reached."""
    return uncached_prefill(_records(sessions))
