"""The older stored shapes of a soak, read into today's (pure; stored JSON in, the typed result
out: :func:`read_soak_result`).

Until the soak's result became one typed :class:`~servelab.core.soak.result.SoakResult`, a soak
row held a hand-made document: findings worded (``title``, ``advice``, ``evidence`` sentences),
each observation ``{"id", "subject", "healthy", "data"}`` with its facts in ``data``, the
determinism probe without the fields it had not measured, the config beside the result, the
findings also in the ``soak_findings`` table. Nothing is rewritten on disk: the upgraders here
(private: each a typed function from a part's shape of any age, :mod:`servelab.core.soak.shapes`,
to today's; today's left as it is) turn such a value into today's shape, and
:func:`read_soak_result` decodes it, once, into the type. The words of
an old finding are dropped (report words its layer and evidence again); an old observation whose
id names no kind known today is dropped.
A soak stored before the conviction rule (:mod:`servelab.core.soak.conviction`) kept no
exonerations and its matrix cells no clock: it reads with none, each cell judged by the idle
timeout as it was then.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TypeVar, cast

from servelab.core.ledger.codec import decode
from servelab.core.soak.result import SoakResult
from servelab.core.soak.shapes import (
    CellFields,
    CorrectnessFields,
    FailureFields,
    KindFields,
    KnownFields,
    LoadFields,
    ObservationData,
    OldObservation,
    PassedOn,
    ProbeFields,
    ReplayFields,
    StartFields,
    StoredConfig,
    StoredDeterminism,
    StoredEvidence,
    StoredExample,
    StoredFinding,
    StoredKnobs,
    StoredLocalization,
    StoredLocated,
    StoredMatrix,
    StoredObservation,
    StoredSessions,
    StoredSoak,
    StoredTargets,
    TelemetryFields,
)
from servelab.core.soak.signatures import Signature
from servelab.core.telemetry.layers import Layer

__all__ = ["read_soak_result"]

_T = TypeVar("_T")


def _obj(value: object, shape: type[_T]) -> _T:
    """``value`` (decoded JSON) as a copy of its ``shape`` (a TypedDict above: the key names
    and value types of its age) when it is a JSON object, else an empty one. The values are
    read by the upgraders, each checked where it is read, and by the codec."""
    del shape  # named for the reader and for mypy: a TypedDict has no isinstance
    return cast("_T", dict(value) if isinstance(value, Mapping) else {})


def _objs(value: object, shape: type[_T]) -> list[_T]:
    """The JSON objects of ``value`` (a list), each as its ``shape``; anything else is dropped."""
    items = value if isinstance(value, list | tuple) else ()
    return [_obj(v, shape) for v in items if isinstance(v, Mapping)]


def read_soak_result(doc: object, config: object = None, findings: object = None) -> SoakResult:
    """A soak's stored result (decoded JSON) of any age, typed. ``config`` and ``findings``: what
    its row kept beside it (a ``soak_runs`` row's ``config`` column, its ``soak_findings``), read
    when the result lacks them. A value that does not fit is a RecordError."""
    return decode(SoakResult, _upgrade_result(_obj(doc, StoredSoak), config, findings))


def _upgrade_result(doc: StoredSoak, config: object, findings: object) -> StoredSoak:
    """A soak's stored result of any age → today's JSON."""
    out = copy.copy(doc)
    cfg = _obj(out.get("config") or config, StoredConfig)
    knobs = _obj(cfg.get("knobs"), StoredKnobs)
    cfg["knobs"] = {str(k): None if v is None else str(v) for k, v in knobs.items()}
    out["config"] = cfg
    out["targets"] = {"entry_url": "", **_obj(out.get("targets"), StoredTargets)}
    out["determinism"] = _upgrade_determinism(out.get("determinism"))
    found = out.get("findings", findings)
    out["findings"] = [
        f for f in map(_upgrade_finding, _objs(found, StoredFinding)) if f is not None
    ]
    observed = map(_upgrade_observation, _objs(out.get("observations"), OldObservation))
    out["observations"] = [o for o in observed if o is not None]
    sessions = _obj(out.get("sessions"), StoredSessions)
    out["sessions"] = {**sessions, "per_session": _objs(sessions.get("per_session"), PassedOn)}
    locs = _objs(out.get("localizations"), StoredLocalization)
    out["localizations"] = [_upgrade_localization(loc) for loc in locs]
    out["exonerated"] = _objs(out.get("exonerated"), PassedOn)  # before the rule: none kept
    return out


def _upgrade_localization(loc: StoredLocalization) -> StoredLocalization:
    """A localization whose matrix said ``size_dependent`` (the minimal payload passed where the
    failing one failed) → its ``dependence`` (``"size"`` when true; undecided when false)."""
    out, matrix = copy.copy(loc), _obj(loc.get("matrix"), StoredMatrix)
    located = _obj(matrix.get("located"), StoredLocated)
    if "size_dependent" in located and "dependence" not in located:
        located["dependence"] = "size" if located.pop("size_dependent") else None
        out["matrix"] = {**matrix, "located": located}
    return out


def _upgrade_determinism(det: object) -> StoredDeterminism:
    """Not measured (None) reads as nothing measured; the older shape left the fields it had not
    measured out and said ``"under_load_ok": null`` when every session ended first."""
    found = _obj(det, StoredDeterminism)
    if "sessions_ended_first" not in found:
        found["sessions_ended_first"] = "under_load_ok" in found and found["under_load_ok"] is None
    return found


def _upgrade_finding(finding: StoredFinding) -> StoredFinding | None:
    """A worded finding (``title``, ``advice``, ``evidence`` items ``{"id", "supports", ...}``)
    → its codes: layer, confidence, supporting and contradicting ids, worker. None: no layer
    known today."""
    if finding.get("layer") not in set(Layer):
        return None
    if "supporting" in finding:
        return finding
    items = [e for e in _objs(finding.get("evidence"), StoredEvidence) if e.get("id") != "worker"]
    confidence = finding.get("confidence")
    return {
        "layer": finding["layer"],
        "confidence": confidence if isinstance(confidence, int | float) else 0.0,
        "supporting": [str(e.get("id")) for e in items if e.get("supports")],
        "contradicting": [str(e.get("id")) for e in items if not e.get("supports")],
        "worker": finding.get("worker"),
    }


# ------------------------------------------------------------------------------- observations
# Each reads an older observation's ``data`` (with the rest of its id after the kind's prefix,
# its subject and healthy) as today's fields.
_Upgrade = Callable[[ObservationData, str, str, bool | None], KindFields]


def _as_is(data: ObservationData, *_: object) -> ObservationData:
    return data


def _known(data: ObservationData, *_: object) -> KnownFields:
    """An engine's progress or the router's metrics: ``"unknown": true`` is ``known`` False."""
    out = copy.copy(data)
    unknown = out.pop("unknown", None)
    return {**out, "known": not unknown}


def _start(data: ObservationData, *_: object) -> StartFields:
    return {"start": data}


def _failure(data: ObservationData, signature: str, *_: object) -> FailureFields:
    return {**data, "signature": signature}


def _cell(data: ObservationData, *_: object) -> CellFields:
    return {"cell": data}


def _replay(data: ObservationData, path: str, *_: object) -> ReplayFields:
    return {"replay": {**data, "path": path}}


def _probe(data: ObservationData, _rest: str, subject: str, healthy: bool | None) -> ProbeFields:
    return {"probe": {**data, "service": subject, "ok": bool(healthy)}}


def _load(data: ObservationData, _rest: str, subject: str, _healthy: bool | None) -> LoadFields:
    return {"load": {"service": subject, "source": data.get("source"), "load": data.get("load")}}


def _correctness(data: ObservationData, issue: str, *_: object) -> CorrectnessFields:
    examples: list[StoredExample] = [
        {"kind": issue, **e} for e in _objs(data.get("examples"), StoredExample)
    ]
    return {"issue": issue, "count": data.get("count", 0), "examples": examples}


def _telemetry(data: ObservationData, *_: object) -> TelemetryFields:
    evidence = copy.copy(data)
    evidence.pop("unknown", None)
    return {"evidence": evidence}


#: An older observation's id (without its scope) → the kind it is today and how its ``data``
#: becomes its fields: exact ids first, then prefixes (none is the start of another), then
#: ``metrics.<service>.<suffix>``.
_EXACT: dict[str, tuple[str, _Upgrade]] = {
    "stalls": ("stalls", _as_is),
    "stalls.reused_connection": ("stalls.reused_connection", _as_is),
    "stalls.fresh_connection": ("stalls.fresh_connection", _as_is),
    "matrix.bisect": ("matrix.bisect", _as_is),
    "router_metrics": ("router_metrics", _known),
    "engines.start": ("engines.start", _start),
}
_PREFIXED: tuple[tuple[str, str, _Upgrade], ...] = (
    ("failure.", "failure", _failure),
    ("matrix.", "matrix.cell", _cell),
    ("replay.", "replay", _replay),
    ("probe.", "probe", _probe),
    ("router_metrics.cb_open.", "router_metrics.cb_open", _as_is),
    ("router_metrics.unhealthy.", "router_metrics.unhealthy", _as_is),
    ("load.", "load", _load),
    ("correctness.", "correctness", _correctness),
    ("telemetry.", "telemetry", _telemetry),
)
_SUFFIXED: tuple[tuple[str, str, _Upgrade], ...] = (
    (".progress", "metrics.progress", _known),
    (".transfer_failed", "metrics.transfer_failed", _as_is),
)


def _kind(base: str) -> tuple[str, _Upgrade, str] | None:
    """The kind of an older observation id (scope removed), how to read it, the rest of its id."""
    if base in _EXACT:
        kind, fields = _EXACT[base]
        return kind, fields, ""
    for prefix, kind, fields in _PREFIXED:
        if base.startswith(prefix):
            return kind, fields, base[len(prefix) :]
    if base.startswith("metrics."):
        for suffix, kind, fields in _SUFFIXED:
            if base.endswith(suffix):
                return kind, fields, base[len("metrics.") : -len(suffix)]
    return None


def _upgrade_observation(obs: OldObservation) -> OldObservation | StoredObservation | None:
    """An older ``{"id", "subject", "healthy", "data"}`` observation → today's (its ``kind``
    and typed fields); today's is returned as it is. None: an id of no kind known today."""
    if "kind" in obs:
        return obs
    ident, subject = str(obs.get("id", "")), str(obs.get("subject", ""))
    scope, sep, rest = ident.partition(":")
    found = _kind(rest if sep and scope in set(Signature) else ident)
    if found is None:
        return None
    kind, fields, tail = found
    typed = fields(_obj(obs.get("data"), ObservationData), tail, subject, obs.get("healthy"))
    return {**typed, "kind": kind, "id": ident, "subject": subject, "healthy": obs.get("healthy")}
