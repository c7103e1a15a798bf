"""The ledger's records: one typed dataclass per kind of row, and the JSON shapes they store.

Pure. :mod:`servelab.io.ledger.ledger` fetches a row as a mapping (JSON columns decoded, ``ok`` a
bool) and returns ``Record.from_row(row)``; ``record.to_json()`` is that row in the ledger's export
(``servelab ledger export``, from which :mod:`servelab.report.docs` builds the docs). The results
the ledger stores as JSON documents are typed in :mod:`servelab.core.ledger.results` (an A/B's
result, a soak's document and its findings).

Older ledgers are read as they are (``from_row``/``from_json`` accept both shapes; nothing is
rewritten on disk): an A/B arm that carries both ``label`` and ``value`` reads ``value`` (else
``label``), and a case event that carries both ``ok`` and ``verified`` is ``ok`` only if both
are. New rows store one field each (``value``; ``ok``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servelab.core.ledger.jsonvalues import obj, objs, opt_bool, opt_int, opt_str
from servelab.core.ledger.results import AbResultRecord, SoakDocument, SoakFinding
from servelab.core.verify.checks import Check, UntypedCheck, read_check

__all__ = [
    "AbRunRecord",
    "BenchRunRecord",
    "CaseEvent",
    "CaseExport",
    "CaseRecord",
    "CheckRecord",
    "DeploymentRecord",
    "Evidence",
    "KnobChangeRecord",
    "LedgerExport",
    "Resolution",
    "SoakRunRecord",
    "Suspect",
    "VerificationRecord",
]


# -- measurements -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeploymentRecord:
    """A bring-up, restart or stop of a deployment; ``detail`` is what the operation reported."""

    id: int
    at: str
    name: str
    spec_hash: str | None
    action: str
    detail: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DeploymentRecord:
        return cls(
            int(row["id"]),
            str(row["at"]),
            str(row["name"]),
            row.get("spec_hash"),
            str(row["action"]),
            obj(row.get("detail")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "name": self.name,
            "spec_hash": self.spec_hash,
            "action": self.action,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True)
class KnobChangeRecord:
    """A declared knob's value changed in a service's env file (``None``: absent)."""

    id: int
    at: str
    service: str
    name: str
    old: str | None
    new: str | None
    reason: str | None
    case_id: int | None
    backup_path: str | None = None

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.name}"

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> KnobChangeRecord:
        return cls(
            id=int(row["id"]),
            at=str(row["at"]),
            service=str(row["service"]),
            name=str(row["name"]),
            old=opt_str(row.get("old")),
            new=opt_str(row.get("new")),
            reason=row.get("reason"),
            case_id=opt_int(row.get("case_id")),
            backup_path=row.get("backup_path"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "service": self.service,
            "name": self.name,
            "old": self.old,
            "new": self.new,
            "reason": self.reason,
            "case_id": self.case_id,
            "backup_path": self.backup_path,
        }


#: A check as the ledger holds it: typed (:class:`~servelab.core.verify.checks.Check`), or an
#: older row's sentence or a code this servelab does not know
#: (:class:`~servelab.core.verify.checks.UntypedCheck`).
CheckRecord = Check | UntypedCheck


@dataclass(frozen=True)
class VerificationRecord:
    """A layered verification and its checks (:mod:`servelab.core.verify.checks`)."""

    id: int
    at: str
    spec_hash: str | None
    ok: bool
    checks: tuple[CheckRecord, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> VerificationRecord:
        checks = tuple(read_check(c) for c in objs(row.get("checks")))
        return cls(int(row["id"]), str(row["at"]), row.get("spec_hash"), bool(row["ok"]), checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "spec_hash": self.spec_hash,
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
        }


@dataclass(frozen=True)
class BenchRunRecord:
    """A bench run; ``records`` (its per-request records) is None when not read."""

    id: int
    at: str
    label: str | None
    config: Mapping[str, Any]
    summary: Mapping[str, Any]
    n_records: int
    records: tuple[Mapping[str, Any], ...] | None = None
    records_pruned_at: str | None = None  # when ``ledger prune`` removed its records

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> BenchRunRecord:
        recs = row.get("records")
        return cls(
            int(row["id"]),
            str(row["at"]),
            row.get("label"),
            obj(row.get("config")),
            obj(row.get("summary")),
            int(row.get("n_records") or 0),
            None if recs is None else objs(recs),
            row.get("records_pruned_at"),
        )

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "at": self.at,
            "label": self.label,
            "config": dict(self.config),
            "summary": dict(self.summary),
            "n_records": self.n_records,
        }
        if self.records_pruned_at is not None:
            out["records_pruned_at"] = self.records_pruned_at
        if self.records is not None:
            out["records"] = [dict(r) for r in self.records]
        return out


@dataclass(frozen=True)
class AbRunRecord:
    id: int
    at: str
    service: str
    knob: str
    config: Mapping[str, Any]
    result: AbResultRecord

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AbRunRecord:
        return cls(
            int(row["id"]),
            str(row["at"]),
            str(row["service"]),
            str(row["knob"]),
            obj(row.get("config")),
            AbResultRecord.from_json(obj(row.get("result"))),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "service": self.service,
            "knob": self.knob,
            "config": dict(self.config),
            "result": self.result.to_json(),
        }


@dataclass(frozen=True)
class SoakRunRecord:
    """A recorded soak: pass/fail, the config it ran with, its document and its findings."""

    id: int
    at: str
    ok: bool | None
    config: Mapping[str, Any]
    result: SoakDocument
    findings: tuple[SoakFinding, ...] = ()

    def knob(self, service: str, knob: str) -> str | None:
        """The knob's value in this soak's config (``SERVICE/NAME``, else ``NAME``)."""
        knobs = obj(self.config.get("knobs"))
        return opt_str(knobs.get(f"{service}/{knob}", knobs.get(knob)))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SoakRunRecord:
        findings = tuple(SoakFinding.from_json(f) for f in objs(row.get("findings")))
        return cls(
            int(row["id"]),
            str(row["at"]),
            opt_bool(row.get("ok")),
            obj(row.get("config")),
            SoakDocument.from_json(obj(row.get("result"))),
            findings,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "ok": self.ok,
            "config": dict(self.config),
            "result": self.result.to_json(),
            "findings": [f.to_json() for f in self.findings],
        }


# -- cases -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseRecord:
    """A case's own row (its suspects, evidence and events are rows of their own)."""

    id: int
    at: str
    title: str
    status: str
    root_cause: str | None = None
    resolved_at: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CaseRecord:
        return cls(
            int(row["id"]),
            str(row["at"]),
            str(row["title"]),
            str(row["status"]),
            row.get("root_cause"),
            row.get("resolved_at"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "title": self.title,
            "status": self.status,
            "root_cause": self.root_cause,
            "resolved_at": self.resolved_at,
        }


@dataclass(frozen=True)
class Suspect:
    target: str
    reason: str | None
    at: str
    verdict: str | None = None
    verdict_at: str | None = None
    id: int = 0
    case_id: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Suspect:
        return cls(
            str(row["target"]),
            row.get("reason"),
            str(row["at"]),
            row.get("verdict"),
            row.get("verdict_at"),
            int(row.get("id") or 0),
            int(row.get("case_id") or 0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "case_id": self.case_id,
            "at": self.at,
            "target": self.target,
            "reason": self.reason,
            "verdict": self.verdict,
            "verdict_at": self.verdict_at,
        }


@dataclass(frozen=True)
class Evidence:
    kind: str
    ref_id: int | None
    note: str | None
    at: str
    id: int = 0
    case_id: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Evidence:
        return cls(
            str(row["kind"]),
            opt_int(row.get("ref_id")),
            row.get("note"),
            str(row["at"]),
            int(row.get("id") or 0),
            int(row.get("case_id") or 0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "case_id": self.case_id,
            "at": self.at,
            "kind": self.kind,
            "ref_id": self.ref_id,
            "note": self.note,
        }


def _event_detail(detail: Mapping[str, Any]) -> dict[str, Any]:
    """An event's detail with one ``ok`` (older ledgers: ``ok`` and ``verified``, both needed)."""
    out = dict(detail)
    if "verified" in out:
        verified = bool(out.pop("verified"))
        out["ok"] = bool(out.get("ok", verified)) and verified
    return out


@dataclass(frozen=True)
class CaseEvent:
    """An action taken under a case (``revert``, ``restore``, ...); ``detail``: what it produced.

    A revert's or a restore's detail is the JSON of :mod:`servelab.core.case.model`'s
    ``RevertEvent`` or ``RestoreEvent``.
    """

    kind: str
    at: str
    detail: Mapping[str, Any]
    id: int = 0
    case_id: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.detail.get("ok"))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CaseEvent:
        return cls(
            str(row["kind"]),
            str(row["at"]),
            _event_detail(obj(row.get("detail"))),
            int(row.get("id") or 0),
            int(row.get("case_id") or 0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "case_id": self.case_id,
            "at": self.at,
            "kind": self.kind,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True)
class Resolution:
    """A case's resolution: its root cause and the verdicts it gave, at ``at``.

    Resolving a case again never erases the earlier resolution: it is kept as a ``resolved`` case
    event (at its own time) with this detail, ``superseded_at`` the time of the new one.
    """

    root_cause: str | None
    at: str
    verdicts: Mapping[str, str] = field(default_factory=dict)
    superseded_at: str | None = None

    KIND = "resolved"

    @classmethod
    def from_event(cls, event: CaseEvent) -> Resolution:
        detail = event.detail
        verdicts = obj(detail.get("verdicts"))
        return cls(
            opt_str(detail.get("root_cause")),
            event.at,
            {str(t): str(v) for t, v in verdicts.items()},
            opt_str(detail.get("superseded_at")),
        )

    def to_json(self) -> dict[str, Any]:
        """The event's detail (its time is the event's own ``at``)."""
        return {
            "root_cause": self.root_cause,
            "verdicts": dict(self.verdicts),
            "superseded_at": self.superseded_at,
        }


# -- the whole ledger ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseExport:
    """A case with its suspects, evidence and events, as the export nests them."""

    case: CaseRecord
    suspects: tuple[Suspect, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    events: tuple[CaseEvent, ...] = ()

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CaseExport:
        return cls(
            CaseRecord.from_row(row),
            tuple(Suspect.from_row(s) for s in objs(row.get("suspects"))),
            tuple(Evidence.from_row(e) for e in objs(row.get("evidence"))),
            tuple(CaseEvent.from_row(e) for e in objs(row.get("events"))),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.case.to_json(),
            "suspects": [s.to_json() for s in self.suspects],
            "evidence": [e.to_json() for e in self.evidence],
            "events": [e.to_json() for e in self.events],
        }


@dataclass(frozen=True)
class LedgerExport:
    """Every record of a ledger: ``servelab ledger export``'s document, typed."""

    schema_version: int
    path: str
    deployments: tuple[DeploymentRecord, ...] = ()
    knob_changes: tuple[KnobChangeRecord, ...] = ()
    verifications: tuple[VerificationRecord, ...] = ()
    bench_runs: tuple[BenchRunRecord, ...] = ()
    ab_runs: tuple[AbRunRecord, ...] = ()
    soak_runs: tuple[SoakRunRecord, ...] = ()
    cases: tuple[CaseExport, ...] = ()

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> LedgerExport:
        return cls(
            schema_version=int(doc.get("schema_version") or 0),
            path=str(doc.get("path", "")),
            deployments=tuple(DeploymentRecord.from_row(r) for r in objs(doc.get("deployments"))),
            knob_changes=tuple(KnobChangeRecord.from_row(r) for r in objs(doc.get("knob_changes"))),
            verifications=tuple(
                VerificationRecord.from_row(r) for r in objs(doc.get("verifications"))
            ),
            bench_runs=tuple(BenchRunRecord.from_row(r) for r in objs(doc.get("bench_runs"))),
            ab_runs=tuple(AbRunRecord.from_row(r) for r in objs(doc.get("ab_runs"))),
            soak_runs=tuple(SoakRunRecord.from_row(r) for r in objs(doc.get("soak_runs"))),
            cases=tuple(CaseExport.from_json(r) for r in objs(doc.get("cases"))),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "path": self.path,
            "deployments": [r.to_json() for r in self.deployments],
            "knob_changes": [r.to_json() for r in self.knob_changes],
            "verifications": [r.to_json() for r in self.verifications],
            "bench_runs": [r.to_json() for r in self.bench_runs],
            "ab_runs": [r.to_json() for r in self.ab_runs],
            "soak_runs": [r.to_json() for r in self.soak_runs],
            "cases": [c.to_json() for c in self.cases],
        }
