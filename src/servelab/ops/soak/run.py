"""One soak run's shared state (:class:`SoakRun`): its config and targets, and what the run has
seen so far (sessions' tallies, stalls, errors, failures, localizations, the determinism probe,
resends, the windows of failed requests and replays), with the tasks and locks its traffic and
localizations share. :mod:`servelab.ops.soak.traffic` fills it; :func:`servelab.ops.soak.soak.soak`
prepares it and concludes it once, at the end, into the one
:class:`~servelab.core.soak.result.SoakResult`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from servelab.core.soak.body import ChatBody
from servelab.core.soak.evidence import CorrectnessIssue, Localization, MaskedResend, Stall
from servelab.core.soak.inflight import InFlight
from servelab.core.soak.result import Determinism, FailedRequest, SoakConfig, Targets
from servelab.core.soak.signatures import Failure, Signature
from servelab.core.verify.coldstart import StartClass
from servelab.io.http.client import HttpClient
from servelab.ops.context import Progress
from servelab.ops.soak.answers import SoakProbes
from servelab.ops.soak.client import Exchange
from servelab.ops.soak.sessions import SessionTally
from servelab.ops.soak.traces import FailedId

__all__ = ["SoakRun"]


@dataclass
class SoakRun:
    """Shared state of one soak run: what it has seen so far (the result is made of it at the
    end, by :func:`servelab.ops.soak.soak.soak`)."""

    config: SoakConfig
    targets: Targets
    progress: Progress
    http: HttpClient = field(default_factory=HttpClient)  # probes, scrapes, lookups (not streams)
    model: str = ""
    sessions: list[SessionTally] = field(default_factory=list)
    stalls: list[Stall] = field(default_factory=list)
    errors: list[FailedRequest] = field(default_factory=list)
    correctness: list[CorrectnessIssue] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    localizations: list[Localization] = field(default_factory=list)
    determinism: Determinism = field(default_factory=Determinism)
    start: StartClass | None = None
    deadline_hit: bool = False
    load: InFlight = field(default_factory=InFlight)  # the sessions' requests out
    tasks: list[asyncio.Task[None]] = field(default_factory=list)  # the sessions
    locators: list[asyncio.Task[None]] = field(default_factory=list)
    signatures: list[Signature] = field(default_factory=list)  # localized (or being localized)
    deadline: float = 0.0  # when localizations must be over (monotonic)
    output_tokens: int = 0  # received by the sessions and the probes
    failed_ids: list[FailedId] = field(default_factory=list)  # stalled or failed, by request id
    resends: list[MaskedResend] = field(default_factory=list)
    router_echoes: bool = False  # an answer through the entry carried its own request id back
    failing: list[tuple[float, float]] = field(default_factory=list)  # failed requests (monotonic)
    replays: list[tuple[float, float]] = field(default_factory=list)  # localizations (monotonic)
    traffic_done: asyncio.Event = field(default_factory=asyncio.Event)
    one_at_a_time: asyncio.Lock = field(default_factory=asyncio.Lock)  # the localizations
    sample: tuple[int, int, ChatBody] | None = None  # the largest payload answered
    probes: SoakProbes | None = None  # the answer probes (set once the model is known)

    def tally(self, ex: Exchange) -> None:
        """Count what one of the soak's own requests received (for the client-vs-server rule)."""
        self.output_tokens += ex.record.output_tokens

    @property
    def active(self) -> bool:
        return any(not task.done() for task in self.tasks)
