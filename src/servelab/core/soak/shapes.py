"""The shapes a soak's result was stored in, of every age (pure; types only): ``TypedDict`` s of
the keys :mod:`servelab.core.soak.upgrade` reads or writes, with the types they had.

A soak row holds the JSON of its result as the servelab of its day wrote it: before the result
was one type, a hand-made document (findings worded, each observation ``{"id", "subject",
"healthy", "data"}``); since, the codec's encoding of
:class:`~servelab.core.soak.result.SoakResult`. The classes here say what each part held (read
from the writers of each age and from real rows, ``tests/core/soak/data/older_soaks.json``);
the upgrader turns one age's into today's, which the codec decodes into the type. A key not
named is passed on as it was; a part named :data:`PassedOn` is not read here at all (the
codec reads it, as today's type).
"""

from __future__ import annotations

from typing import TypedDict

from pydantic import JsonValue

__all__ = [
    "CellFields",
    "CorrectnessFields",
    "FailureFields",
    "KindFields",
    "KnownFields",
    "LoadData",
    "LoadFields",
    "ObservationData",
    "OldObservation",
    "PassedOn",
    "ProbeData",
    "ProbeFields",
    "ReplayData",
    "ReplayFields",
    "StartFields",
    "StoredCite",
    "StoredConfig",
    "StoredDeterminism",
    "StoredEvidence",
    "StoredExample",
    "StoredFinding",
    "StoredKnobs",
    "StoredLocalization",
    "StoredLocated",
    "StoredMatrix",
    "StoredObservation",
    "StoredSessions",
    "StoredSoak",
    "StoredTargets",
    "TelemetryFields",
]

#: A part of a stored soak this module passes on without reading (its type's codec reads it).
PassedOn = dict[str, JsonValue]


# Each TypedDict names what a stored soak of some age held: the keys this module reads or
# writes, with the types they had (read from the writers of each age and from real rows,
# ``tests/core/soak/data/older_soaks.json``). A key not named is passed on as it was.
#: A soak's knobs: a name → its value (older configs kept a number or a flag as it was given).
StoredKnobs = dict[str, str | int | float | bool | None]


class StoredConfig(TypedDict, total=False):
    """A soak's config (the result's, or the row's ``config`` column before it was in it)."""

    knobs: StoredKnobs


class StoredTargets(TypedDict, total=False):
    """What the soak ran against (``entry_url`` since the entry point was kept apart)."""

    entry_url: str


class StoredDeterminism(TypedDict, total=False):
    """The determinism probe: older ones left out what they had not measured and said
    ``"under_load_ok": null`` when every session ended first."""

    under_load_ok: bool | None
    sessions_ended_first: bool


class StoredEvidence(TypedDict, total=False):
    """An older finding's evidence item (worded): its observation's id, and whether it
    supports the finding."""

    id: str
    supports: bool
    text: str


class StoredFinding(TypedDict, total=False):
    """A finding of either age: worded (``title``, ``advice``, ``evidence``; before findings
    were codes) or today's (``supporting``, ``contradicting``)."""

    layer: str
    confidence: float
    worker: str | None
    title: str
    advice: str
    evidence: list[StoredEvidence]
    supporting: list[str]
    contradicting: list[str]


class StoredLocated(TypedDict, total=False):
    """Where the matrix located a failure: ``size_dependent`` (older), ``dependence`` (today)."""

    size_dependent: bool
    dependence: str | None


class StoredMatrix(TypedDict, total=False):
    located: StoredLocated


class StoredLocalization(TypedDict, total=False):
    matrix: StoredMatrix


class StoredSessions(TypedDict, total=False):
    per_session: list[PassedOn]


class StoredCite(TypedDict, total=False):
    """A telemetry rule's metric read."""

    source: str
    series: str
    value: float
    kind: str


class StoredExample(TypedDict, total=False):
    """A correctness example: older ones took their ``kind`` from the observation's id."""

    kind: str
    session: int
    round: int
    detail: str


class ObservationData(TypedDict, total=False):
    """An older observation's ``data``: the facts of its kind (the comments name the kinds),
    today each kind's fields."""

    # stalls, stalls.reused_connection, stalls.fresh_connection; correctness
    count: int
    head: int
    requests_carried: list[int]
    examples: list[StoredExample]
    # failure
    session: int
    round: int
    status: int | None
    error: str | None
    detail: str
    payload_bytes: int
    connection_requests: int | list[int]
    # matrix cells, matrix.bisect, replay, probe
    hop: str
    target: str
    payload: str
    stream: bool
    side: str
    outcome: str
    elapsed_s: float
    first_byte_s: float | None
    received_bytes: int
    ok_bytes: int
    fail_bytes: int
    kind: str
    role: str
    # metrics.<service>.progress, .transfer_failed; router_metrics and its cb_open, unhealthy
    unknown: bool
    running: float
    queued: float | None
    in_transfer: float | None
    generated_delta: float
    prompt_tokens_delta: float
    requests_delta: float
    interval_s: float
    delta: float
    errors: dict[str, float]
    inflight_aged: float
    worker: str | None
    state: str | float
    # engines.start
    start: str
    reason: str | None
    first_s: float
    second_s: float | None
    served_before: int
    # load.<service>
    source: str
    load: float | None
    # telemetry.<rule>
    rule: str
    subject: str
    points_at: str | None
    threshold: float | None
    cites: list[StoredCite]


class KindFields(TypedDict):
    """Today's fields of one kind of observation (each upgrader's own TypedDict below)."""


class KnownFields(ObservationData, total=False):
    known: bool


class FailureFields(ObservationData, total=False):
    signature: str


class StartFields(KindFields):
    start: ObservationData


class CellFields(KindFields):
    cell: ObservationData


class ReplayData(ObservationData, total=False):
    path: str


class ReplayFields(KindFields):
    replay: ReplayData


class ProbeData(ObservationData, total=False):
    service: str
    ok: bool


class ProbeFields(KindFields):
    probe: ProbeData


class LoadData(TypedDict):
    service: str
    source: str | None
    load: float | None


class LoadFields(KindFields):
    load: LoadData


class CorrectnessFields(KindFields):
    issue: str
    count: int
    examples: list[StoredExample]


class TelemetryFields(KindFields):
    evidence: ObservationData


class StoredObservation(KindFields):
    """Today's observation: its kind's fields (not named here), then what every one has."""

    kind: str
    id: str
    subject: str
    healthy: bool | None


class OldObservation(TypedDict, total=False):
    """An older observation (``id``, ``subject``, ``healthy``, its facts in ``data``); today's
    has its ``kind`` and its fields beside them (:class:`_Fields`)."""

    id: str
    subject: str
    healthy: bool | None
    data: ObservationData
    kind: str


class StoredSoak(TypedDict, total=False):
    """A soak's stored result, of any age: the parts this module upgrades."""

    config: StoredConfig
    targets: StoredTargets
    determinism: StoredDeterminism
    findings: list[StoredFinding]
    observations: list[OldObservation | StoredObservation]
    sessions: StoredSessions
    localizations: list[StoredLocalization]
    exonerated: list[PassedOn]
