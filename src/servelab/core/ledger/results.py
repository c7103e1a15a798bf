"""The stored shapes of A/B results: what ``ab --json`` prints and the ledger records (the
``result`` of an A/B run; a soak's is :class:`servelab.core.soak.result.SoakResult`).

Pure. ops builds them from its results; :mod:`servelab.core.ledger.evidence` reads them back from
the ledger. Older ledgers' A/B arms carry ``label`` next to ``value`` (equal); both read as
``value``, and new arms store ``value`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servelab.core.ledger.jsonvalues import obj, objs, opt_float, opt_int, opt_str

__all__ = [
    "AbArm",
    "AbResultRecord",
    "AnomalyRecord",
    "ComparisonRecord",
]


# -- A/B results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AbArm:
    """One arm of an A/B: the knob's value, throughput repeats by concurrency, its verifications."""

    value: str | None
    throughput: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    verifications: tuple[int | None, ...] = ()

    @classmethod
    def from_json(cls, arm: Mapping[str, Any]) -> AbArm:
        """Both shapes: ``value`` (new) or ``label`` (older ledgers carry both, equal)."""
        value = arm["value"] if "value" in arm else arm.get("label")
        thr = {str(c): tuple(v or ()) for c, v in obj(arm.get("throughput")).items()}
        vers = tuple(opt_int(v) for v in arm.get("verifications") or ())
        return cls(opt_str(value), thr, vers)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "verifications": list(self.verifications),
            "throughput": {c: list(v) for c, v in self.throughput.items()},
        }


_COMPARISON_KEYS = {"concurrency", "ratio", "ci", "verdict", "baseline", "candidate", "confidence"}


@dataclass(frozen=True)
class ComparisonRecord:
    """Candidate vs baseline at one concurrency (``extra``: method, sample sizes, reason)."""

    concurrency: int
    ratio: float | None
    ci: tuple[float, float] | None
    verdict: str
    baseline: str | None
    candidate: str | None
    confidence: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, comp: Mapping[str, Any]) -> ComparisonRecord:
        ci = comp.get("ci")
        pair = ci if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
        return cls(
            concurrency=int(comp.get("concurrency", 0)),
            ratio=opt_float(comp.get("ratio")),
            ci=None if pair is None else (float(pair[0]), float(pair[1])),
            verdict=str(comp.get("verdict", "inconclusive")),
            baseline=opt_str(comp.get("baseline")),
            candidate=opt_str(comp.get("candidate")),
            confidence=opt_float(comp.get("confidence")),
            extra={k: v for k, v in comp.items() if k not in _COMPARISON_KEYS},
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            **self.extra,
            "concurrency": self.concurrency,
            "ratio": self.ratio,
            "ci": None if self.ci is None else list(self.ci),
            "verdict": self.verdict,
            "baseline": self.baseline,
            "candidate": self.candidate,
        }
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out


@dataclass(frozen=True)
class AnomalyRecord:
    """Within one arm, throughput falls at ``concurrency`` (``extra``: the numbers)."""

    arm: str | None
    concurrency: int | None
    kind: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, anomaly: Mapping[str, Any]) -> AnomalyRecord:
        extra = {k: v for k, v in anomaly.items() if k not in {"arm", "concurrency", "kind"}}
        return cls(
            opt_str(anomaly.get("arm")),
            opt_int(anomaly.get("concurrency")),
            str(anomaly.get("kind", "non_monotonic")),
            extra,
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "arm": self.arm, "concurrency": self.concurrency, "kind": self.kind}


@dataclass(frozen=True)
class AbResultRecord:
    """What an A/B found (the ``ab --json`` document and what the ledger records)."""

    service: str | None = None
    knob: str | None = None
    baseline: str | None = None
    candidate: str | None = None
    original: str | None = None
    restored: bool = False
    arms: tuple[AbArm, ...] = ()
    comparisons: tuple[ComparisonRecord, ...] = ()
    anomalies: tuple[AnomalyRecord, ...] = ()
    ab_id: int | None = None
    #: every visit in the order it ran (arm, round, order, live proof, throughput, timing)
    visits: tuple[Mapping[str, Any], ...] = ()
    #: the design: order scheme, rounds, stopping rule, cost against the fixed design
    design: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, result: Mapping[str, Any]) -> AbResultRecord:
        return cls(
            service=opt_str(result.get("service")),
            knob=opt_str(result.get("knob")),
            baseline=opt_str(result.get("baseline")),
            candidate=opt_str(result.get("candidate")),
            original=opt_str(result.get("original")),
            restored=bool(result.get("restored")),
            arms=tuple(AbArm.from_json(a) for a in objs(result.get("arms"))),
            comparisons=tuple(
                ComparisonRecord.from_json(c) for c in objs(result.get("comparisons"))
            ),
            anomalies=tuple(AnomalyRecord.from_json(a) for a in objs(result.get("anomalies"))),
            ab_id=opt_int(result.get("ab_id")),
            visits=tuple(objs(result.get("visits"))),
            design=obj(result.get("design")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "knob": self.knob,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "original": self.original,
            "restored": self.restored,
            "arms": [a.to_json() for a in self.arms],
            "comparisons": [c.to_json() for c in self.comparisons],
            "anomalies": [a.to_json() for a in self.anomalies],
            "ab_id": self.ab_id,
            "visits": [dict(v) for v in self.visits],
            "design": dict(self.design),
        }
