"""The stored shapes of soak results: what ``soak --json`` prints and the ledger records (the
``result`` of a soak run, and its findings).

Pure. ops builds them from its results; :mod:`servelab.core.ledger.evidence` reads them back from
the ledger. (An A/B's result is :class:`servelab.core.ab.result.AbResult`.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servelab.core.ledger.jsonvalues import obj, objs, opt_bool, opt_float, opt_int, opt_str
from servelab.core.telemetry.summary import RunTelemetry

__all__ = [
    "Determinism",
    "FailedRequest",
    "SoakDocument",
    "SoakFinding",
    "SoakSessions",
]


# -- soak results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SoakFinding:
    """A localized layer with its confidence, title, advice and each piece of evidence."""

    layer: str | None
    confidence: float | None
    title: str = ""
    advice: str = ""
    evidence: tuple[Any, ...] = ()
    worker: str | None = None  # the worker singled out (None: the layer as a whole)

    @classmethod
    def from_json(cls, finding: Mapping[str, Any]) -> SoakFinding:
        return cls(
            opt_str(finding.get("layer")),
            opt_float(finding.get("confidence")),
            str(finding.get("title", "")),
            str(finding.get("advice", "")),
            tuple(finding.get("evidence") or ()),
            opt_str(finding.get("worker")),
        )

    def to_json(self) -> dict[str, Any]:
        doc = {
            "layer": self.layer,
            "confidence": self.confidence,
            "title": self.title,
            "advice": self.advice,
            "evidence": list(self.evidence),
        }
        if self.worker is not None:
            doc["worker"] = self.worker
        return doc


@dataclass(frozen=True)
class FailedRequest:
    """A soak request that failed (not a stall): where, its HTTP status, the reason and detail."""

    session: int
    round: int
    status: int | None
    error: str | None
    detail: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FailedRequest:
        return cls(
            session=int(data.get("session") or 0),
            round=int(data.get("round") or 0),
            status=opt_int(data.get("status")),
            error=opt_str(data.get("error")),
            detail=str(data.get("detail") or ""),
        )

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "round": self.round, "status": self.status,
                "error": self.error, "detail": self.detail}  # fmt: skip


@dataclass(frozen=True)
class Determinism:
    """The soak's greedy determinism probe: at concurrency 1 first, then under load.

    A field left None was not measured and is left out of the JSON: ``reference_ok`` (the C1
    probe ran), ``under_load_ok`` and ``concurrency`` (the probe under load ran, with that many
    requests in flight), ``same_text`` (both answered, compared). ``sessions_ended_first``: the
    probe under load was not sent because every session ended first (``"under_load_ok": null``).
    """

    reference_ok: bool | None = None
    under_load_ok: bool | None = None
    concurrency: int | None = None
    same_text: bool | None = None
    sessions_ended_first: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Determinism:
        ended = "under_load_ok" in data and data["under_load_ok"] is None
        return cls(
            reference_ok=opt_bool(data.get("reference_ok")),
            under_load_ok=opt_bool(data.get("under_load_ok")),
            concurrency=opt_int(data.get("concurrency")),
            same_text=opt_bool(data.get("same_text")),
            sessions_ended_first=ended,
        )

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        if self.reference_ok is not None:
            doc["reference_ok"] = self.reference_ok
        if self.sessions_ended_first:
            doc["under_load_ok"] = None
        elif self.under_load_ok is not None:
            doc["under_load_ok"] = self.under_load_ok
        if self.concurrency is not None:
            doc["concurrency"] = self.concurrency
        if self.same_text is not None:
            doc["same_text"] = self.same_text
        return doc


@dataclass(frozen=True)
class SoakSessions:
    count: int = 0
    completed: int = 0
    rounds_done: int = 0
    requests: int = 0
    per_session: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SoakSessions:
        count, completed, rounds, requests = (
            int(data.get(k) or 0) for k in ("count", "completed", "rounds_done", "requests")
        )
        return cls(count, completed, rounds, requests, objs(data.get("per_session")))

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "completed": self.completed,
            "rounds_done": self.rounds_done,
            "requests": self.requests,
            "per_session": [dict(s) for s in self.per_session],
        }


@dataclass(frozen=True)
class SoakDocument:
    """A soak's result: the ``soak --json`` document and what the ledger records.

    ``config``, ``targets`` and the per-item lists are the soak's own dataclasses as JSON.
    """

    ok: bool | None = None
    soak_id: int | None = None
    model: str | None = None
    elapsed_s: float = 0.0
    interrupted: bool = False
    deadline_hit: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    targets: Mapping[str, Any] = field(default_factory=dict)
    sessions: SoakSessions = field(default_factory=SoakSessions)
    stalls: tuple[Mapping[str, Any], ...] = ()
    errors: tuple[FailedRequest, ...] = ()
    correctness: tuple[Mapping[str, Any], ...] = ()
    determinism: Determinism | None = None
    localized: bool = False
    observations: tuple[Mapping[str, Any], ...] = ()
    findings: tuple[SoakFinding, ...] = ()
    #: Every failed request with its signature; one localization (replay matrix, sources) per
    #: distinct signature; the engines' start (cold/warm); why failures gave no finding.
    failures: tuple[Mapping[str, Any], ...] = ()
    localizations: tuple[Mapping[str, Any], ...] = ()
    start: Mapping[str, Any] | None = None
    undecided: Mapping[str, Any] | None = None
    #: What the router and the engines counted over the soak (None: not watched, older rows).
    telemetry: RunTelemetry | None = None
    #: A traced soak: spans received, and each failed request's phases so far (None: untraced).
    traces: Mapping[str, Any] | None = None

    @property
    def knobs(self) -> Mapping[str, Any]:
        """The knob values the soak ran with (``SERVICE/NAME`` or ``NAME`` → value)."""
        return obj(self.config.get("knobs"))

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SoakDocument:
        det = doc.get("determinism")
        return cls(
            ok=opt_bool(doc.get("ok")),
            soak_id=opt_int(doc.get("soak_id")),
            model=opt_str(doc.get("model")),
            elapsed_s=float(doc.get("elapsed_s") or 0.0),
            interrupted=bool(doc.get("interrupted")),
            deadline_hit=bool(doc.get("deadline_hit")),
            config=obj(doc.get("config")),
            targets=obj(doc.get("targets")),
            sessions=SoakSessions.from_json(obj(doc.get("sessions"))),
            stalls=objs(doc.get("stalls")),
            errors=tuple(FailedRequest.from_json(e) for e in objs(doc.get("errors"))),
            correctness=objs(doc.get("correctness")),
            determinism=None if det is None else Determinism.from_json(obj(det)),
            localized=bool(doc.get("localized")),
            observations=objs(doc.get("observations")),
            findings=tuple(SoakFinding.from_json(f) for f in objs(doc.get("findings"))),
            failures=objs(doc.get("failures")),
            localizations=objs(doc.get("localizations")),
            start=None if doc.get("start") is None else obj(doc.get("start")),
            undecided=None if doc.get("undecided") is None else obj(doc.get("undecided")),
            telemetry=None
            if not doc.get("telemetry")
            else RunTelemetry.from_json(doc["telemetry"]),
            traces=None if doc.get("traces") is None else obj(doc.get("traces")),
        )

    def to_json(self) -> dict[str, Any]:
        out = self._json()
        if self.traces is not None:
            out["traces"] = dict(self.traces)
        return out

    def _json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "soak_id": self.soak_id,
            "model": self.model,
            "elapsed_s": self.elapsed_s,
            "interrupted": self.interrupted,
            "deadline_hit": self.deadline_hit,
            "config": dict(self.config),
            "targets": dict(self.targets),
            "sessions": self.sessions.to_json(),
            "stalls": [dict(s) for s in self.stalls],
            "errors": [e.to_json() for e in self.errors],
            "correctness": [dict(c) for c in self.correctness],
            "determinism": None if self.determinism is None else self.determinism.to_json(),
            "localized": self.localized,
            "observations": [dict(o) for o in self.observations],
            "findings": [f.to_json() for f in self.findings],
            "failures": [dict(f) for f in self.failures],
            "localizations": [dict(x) for x in self.localizations],
            "start": None if self.start is None else dict(self.start),
            "undecided": None if self.undecided is None else dict(self.undecided),
            "telemetry": None if self.telemetry is None else self.telemetry.to_json(),
        }
