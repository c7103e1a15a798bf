"""A soak's result: the one type ops builds, the ledger stores and report renders (pure).

:class:`SoakResult` holds what the soak did and saw as codes, ids and numbers: its config and
targets, the sessions, every stall, failed request and correctness violation, the determinism
probe, each localization (:class:`~servelab.core.soak.evidence.Localization`), the observations
and findings of the diagnosis (:mod:`servelab.core.soak.diagnose`) or why there is none, the run
telemetry and, traced, where the failed requests stopped. Nothing in it is worded: report words
it, from a live result and from a ledger row alike. It is stored and printed through
:mod:`servelab.core.ledger.codec` (``encode``/``decode``); a row an older servelab wrote is read
through :mod:`servelab.core.soak.upgrade` first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from servelab.core.engines import EngineName
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load.cache import CacheSummary
from servelab.core.load.metrics import SloAttainment
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.load.slo import SLO
from servelab.core.redacted import StoredHeaders, StoredText, StoredUrl
from servelab.core.soak.conviction import Exoneration
from servelab.core.soak.deadlines import Deadlines
from servelab.core.soak.evidence import CorrectnessIssue, Localization, MaskedResend, Stall
from servelab.core.soak.finding import Dropped, Finding
from servelab.core.soak.fresh import FreshContext, UncachedPrefill
from servelab.core.soak.observation import Observation
from servelab.core.soak.signatures import Failure
from servelab.core.soak.undecided import Undecided
from servelab.core.telemetry.summary import RunTelemetry
from servelab.core.telemetry.traces import RequestPhases
from servelab.core.verify.coldstart import StartClass

__all__ = [
    "Determinism",
    "FailedRequest",
    "SessionOutcome",
    "SoakClient",
    "SoakConfig",
    "SoakResult",
    "SoakSessions",
    "SoakTraces",
    "Targets",
    "WorkerTarget",
]


class SoakClient(StrEnum):
    """Which client sends the sessions: servelab's own (it sends a request again on a new
    connection when the server closed the kept-alive one, and records each such resend),
    ``naive`` (a plain keep-alive client: it reuses the connection whatever its state and never
    sends again), or ``openai`` (the official OpenAI SDK, with its own connection pool and
    retries: what a user's agent sees)."""

    SERVELAB = "servelab"
    NAIVE = "naive"
    OPENAI = "openai"


@dataclass(frozen=True)
class SoakConfig:
    """How hard and how long to soak. ``seed`` makes the traffic reproducible."""

    sessions: int = 4
    rounds: int = 6
    think_time_s: float = 0.0
    connection: str = "reuse"  # "reuse" | "fresh"
    #: which client sends the sessions (see :class:`SoakClient`)
    client: SoakClient = SoakClient.SERVELAB
    #: request headers every request of the soak carries (``((name, value), ...)``); encoded
    #: with secret-looking values redacted (:func:`~servelab.core.redaction.redact_headers`)
    headers: StoredHeaders = ()
    duration_s: float = 300.0
    idle_timeout_s: float = 30.0
    max_tokens: int = 24
    turn_words: int = 48
    #: each round's new turn short or long by a seeded mix (None: ``turn_words`` every round)
    fresh_context: FreshContext | None = None
    seed: int = 0
    model: StoredText | None = None  # encoded with a token in it masked
    localize: bool = True
    check_determinism: bool = True
    #: Greedy answer probes sent at C1 before the sessions and again under load (0: none), and
    #: the deployment whose references (verify's, in the ledger) they are compared with (its
    #: router's mark, :func:`servelab.ops.verify.answers.answers_owner`; a bare name: older).
    answer_probes: int = 3
    answers_from: Annotated[str | None, OMITTED_IF_NONE] = None
    #: Warm the engines (and record whether they were cold) before measuring.
    warm_up: bool = True
    #: What the deployment ran with, ``{"service/NAME": value}`` (recorded, not acted on): a case
    #: reads it to tell whether a soak failed with a knob and passed without it.
    knobs: Mapping[str, str | None] = field(default_factory=dict)
    #: The objectives the sessions' requests are judged by (None: none; left out of the JSON).
    slo: Annotated[SLO | None, OMITTED_IF_NONE] = None

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.rounds < 1:
            raise ValueError("sessions and rounds must be ≥ 1")
        if self.connection not in ("reuse", "fresh"):
            raise ValueError(f"connection must be 'reuse' or 'fresh', got {self.connection!r}")
        if self.duration_s <= 0 or self.idle_timeout_s <= 0 or self.think_time_s < 0:
            raise ValueError("duration and idle timeout must be > 0, think time ≥ 0")

    @property
    def deadlines(self) -> Deadlines:
        """Every time budget the soak derives from its idle timeout and duration."""
        return Deadlines(self.idle_timeout_s, self.duration_s)

    def knob(self, service: str, name: str) -> str | None:
        """The knob's value the soak ran with (``SERVICE/NAME``, else ``NAME``; None: absent)."""
        return self.knobs.get(f"{service}/{name}", self.knobs.get(name))


@dataclass(frozen=True)
class WorkerTarget:
    """An engine to look at: its service name, role (prefill/decode), base URL, and (a prefill)
    its KV bootstrap port (None: unknown, so no pair replay goes straight to it)."""

    service: str
    role: str
    url: StoredUrl
    bootstrap_port: int | None = None


@dataclass(frozen=True)
class Targets:
    """Where the soak sends traffic and what it inspects when something fails.

    ``metrics_url`` is the router's Prometheus endpoint base (``http://HOST:PORT``; None: not
    known, its metrics are then unknown). ``engine``: the workers' engine (a soak row stored
    before it read as SGLang's).
    """

    entry_url: StoredUrl
    router_url: StoredUrl | None = None
    workers: tuple[WorkerTarget, ...] = ()
    router_service: str = "router"
    metrics_url: StoredUrl | None = None
    #: whose PD hand-off a direct pair replay speaks (SGLang's bootstrap rooms, vLLM's NIXL legs)
    engine: EngineName = "sglang"
    #: the path the sessions take to ``entry_url``: straight, or through a forward proxy (the
    #: agents' client's environment, ``--proxy``); the router's replay hop is always straight
    route: ProxyRoute = field(default_factory=ProxyRoute)

    @property
    def via_proxy(self) -> bool:
        """A proxy (reverse: the entry is not the router; or forward) stands before the router."""
        router = self.router_url
        if router is not None and self.route.forwarded:
            return True
        return router is not None and router.rstrip("/") != self.entry_url.rstrip("/")

    @property
    def proxy(self) -> str | None:
        """The forward proxy the entry's requests go through (None: straight)."""
        return self.route.proxy if self.route.forwarded else None


@dataclass(frozen=True)
class SessionOutcome:
    """What one session did: rounds completed, requests and connections, whether it stalled,
    its failure (``reason: detail``), and what the prefix cache served its prompts over every
    round (``cache``) and from round 2 on (``warm``: the rounds that resend a history)."""

    session: int
    rounds_done: int = 0
    requests: int = 0
    connections: int = 0
    stalled: bool = False
    error: str | None = None
    cache: CacheSummary = field(default_factory=CacheSummary)
    warm: CacheSummary = field(default_factory=CacheSummary)


@dataclass(frozen=True)
class SoakSessions:
    """The sessions, counted: how many, how many did every round, rounds and requests done, and
    each one (:meth:`of` counts them)."""

    count: int = 0
    completed: int = 0
    rounds_done: int = 0
    requests: int = 0
    per_session: tuple[SessionOutcome, ...] = ()

    @classmethod
    def of(cls, sessions: Sequence[SessionOutcome], rounds: int) -> SoakSessions:
        return cls(
            count=len(sessions),
            completed=sum(s.rounds_done == rounds for s in sessions),
            rounds_done=sum(s.rounds_done for s in sessions),
            requests=sum(s.requests for s in sessions),
            per_session=tuple(sessions),
        )


@dataclass(frozen=True)
class FailedRequest:
    """A soak request that failed (not a stall): where, its HTTP status, the reason and detail."""

    session: int
    round: int
    status: int | None
    error: str | None
    detail: str = ""


@dataclass(frozen=True)
class Determinism:
    """The soak's greedy determinism probe: at concurrency 1 first, then under load.

    A field left None was not measured: ``reference_ok`` (the C1 probe ran), ``under_load_ok``
    and ``concurrency`` (the probe under load ran, with that many requests in flight),
    ``same_text`` (both answered, compared). ``sessions_ended_first``: the probe under load was
    not sent because every session ended first.
    """

    reference_ok: bool | None = None
    under_load_ok: bool | None = None
    concurrency: int | None = None
    same_text: bool | None = None
    sessions_ended_first: bool = False


@dataclass(frozen=True)
class SoakTraces:
    """A traced soak: the spans received over it (kept in the ledger's ``spans`` table), and
    for each failed or stalled request, the worker phases its spans reached."""

    n_spans: int
    requests: tuple[RequestPhases, ...] = ()


@dataclass(frozen=True)
class SoakResult:
    """The soak's result (partial when interrupted or cut by the deadline).

    ``failures`` every failed request with its signature (``errors`` those that did not stall,
    ``stalls`` those that did); ``localizations`` one per distinct signature localized; ``start``
    whether the engines were cold (None: no warm-up ran); ``undecided`` why failures gave no
    finding; ``dropped`` the findings a stronger one further out explains; ``exonerated`` the
    layers the conviction rule cleared (:mod:`servelab.core.soak.conviction`); ``resends`` every
    request the client sent again (a failure it masked); ``telemetry`` the router's and the
    engines' metrics over the soak (None: not watched); ``traces`` None when untraced;
    ``soak_id`` set once recorded in the ledger; ``slo`` the sessions' requests against the
    config's SLO.
    """

    config: SoakConfig
    targets: Targets
    model: StoredText = ""  # as the entry point lists it; encoded with a token in it masked
    elapsed_s: float = 0.0
    interrupted: bool = False
    deadline_hit: bool = False
    sessions: SoakSessions = field(default_factory=SoakSessions)
    stalls: tuple[Stall, ...] = ()
    errors: tuple[FailedRequest, ...] = ()
    correctness: tuple[CorrectnessIssue, ...] = ()
    determinism: Determinism = field(default_factory=Determinism)
    localized: bool = False
    observations: tuple[Observation, ...] = ()
    findings: tuple[Finding, ...] = ()
    failures: tuple[Failure, ...] = ()
    localizations: tuple[Localization, ...] = ()
    start: StartClass | None = None
    undecided: Undecided | None = None
    dropped: tuple[Dropped, ...] = ()
    exonerated: tuple[Exoneration, ...] = ()
    #: the uncached prompt tokens the rounds' prefills reached (from usage's cached tokens)
    uncached: UncachedPrefill = field(default_factory=UncachedPrefill)
    resends: tuple[MaskedResend, ...] = ()
    telemetry: RunTelemetry | None = None
    traces: SoakTraces | None = None
    soak_id: int | None = None
    #: the sessions' requests against the config's SLO (None: no SLO; left out of the JSON)
    slo: Annotated[SloAttainment | None, OMITTED_IF_NONE] = None

    @property
    def ok(self) -> bool:
        """No stall, no failed request, no correctness issue, no finding, not interrupted."""
        clean = not (self.stalls or self.errors or self.correctness or self.findings)
        return clean and not self.interrupted
