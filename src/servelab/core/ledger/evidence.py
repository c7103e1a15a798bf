"""The ledger's records: one typed dataclass per kind of row (pure).

:mod:`servelab.io.ledger.ledger` fetches a row as a mapping (JSON columns decoded, ``ok`` a bool)
and reads it with ``decode(Record, row)``; ``encode(record)`` is that row in the ledger's export
(``servelab ledger export``, from which :mod:`servelab.report.docs` builds the docs); both are the
one codec of :mod:`servelab.core.ledger.codec`. The A/B result an ``ab_runs`` row holds is
:class:`servelab.core.ab.result.AbResult`; a soak's is :class:`servelab.core.soak.result.SoakResult`
(:func:`read_soak_run` reads a soak row of any age).

Older ledgers are read as they are (nothing is rewritten on disk): where an older servelab stored
another shape, the field's reader upgrades it before the codec reads it
(:func:`~servelab.core.ab.result.upgrade_ab_result`; :func:`upgrade_event_detail`: a case event
whose detail carries both ``ok`` and ``verified`` is ``ok`` only if both are, and new rows store
``ok`` only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, PlainSerializer, PlainValidator, ValidationInfo

from servelab.core.ab.result import AbResult, upgrade_ab_result
from servelab.core.ledger.codec import OMITTED_IF_NONE, JsonObject, decode
from servelab.core.ledger.jsonvalues import obj, objs
from servelab.core.soak.result import SoakResult
from servelab.core.soak.upgrade import upgrade_soak_run
from servelab.core.verify.checks import Check, UntypedCheck, read_check

__all__ = [
    "AbRunRecord",
    "BenchRunRecord",
    "CaseEvent",
    "CaseEvidence",
    "CaseExport",
    "CaseRecord",
    "CheckRecord",
    "DeploymentRecord",
    "KnobChangeRecord",
    "LedgerExport",
    "Resolution",
    "SoakRunRecord",
    "StoredCheck",
    "Suspect",
    "VerificationRecord",
    "read_soak_run",
    "upgrade_event_detail",
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
    #: JSON: the report the deploy operation wrote (its type is above this layer, in ops/deploy)
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class KnobChangeRecord:
    """A declared knob's value changed in a service's env file (``None``: absent)."""

    id: int
    at: str
    service: str
    name: str
    old: str | None = None
    new: str | None = None
    reason: str | None = None
    case_id: int | None = None
    backup_path: str | None = None

    @property
    def target(self) -> str:
        return f"knob:{self.service}/{self.name}"


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

    def to_json(self) -> JsonObject:
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
    #: JSON, as bench wrote them: its config and its run's summary (types above this layer)
    config: Mapping[str, Any]
    summary: Mapping[str, Any]
    n_records: int = 0
    #: JSON: the per-request records as stored (older ledgers hold other shapes too)
    records: Annotated[tuple[Mapping[str, Any], ...] | None, OMITTED_IF_NONE] = None
    #: when ``ledger prune`` removed its records
    records_pruned_at: Annotated[str | None, OMITTED_IF_NONE] = None


def _ab_result_of_row(doc: Any, info: ValidationInfo) -> Any:
    """An ``ab_runs`` row's result in today's shape, named by its row where it does not name
    itself (:func:`~servelab.core.ab.result.upgrade_ab_result`)."""
    row = info.data
    config = obj(row.get("config"))
    named = {"service": row.get("service"), "knob": row.get("knob")}
    named |= {"baseline": config.get("baseline"), "candidate": config.get("candidate")}
    return upgrade_ab_result(doc, named)


@dataclass(frozen=True)
class AbRunRecord:
    """A recorded A/B: the config it ran with and its result (older shapes upgraded)."""

    id: int
    at: str
    service: str
    knob: str
    #: JSON: the A/B's config as it ran (its type, ops' AbConfig, is above this layer)
    config: Mapping[str, Any]
    result: Annotated[AbResult, BeforeValidator(_ab_result_of_row)]


@dataclass(frozen=True)
class SoakRunRecord:
    """A recorded soak: when, whether it passed (the row's ``ok``; None: not known), and its
    result (its config, findings and everything else: codes and numbers, never words)."""

    id: int
    at: str
    ok: bool | None
    result: SoakResult


def read_soak_run(row: Mapping[str, Any]) -> SoakRunRecord:
    """A ``soak_runs`` row (``findings``: its ``soak_findings``) or an export's soak run, of any
    age (:func:`~servelab.core.soak.upgrade.upgrade_soak_run`)."""
    return decode(SoakRunRecord, upgrade_soak_run(row))


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


@dataclass(frozen=True)
class Suspect:
    target: str
    reason: str | None
    at: str
    verdict: str | None = None
    verdict_at: str | None = None
    id: int = 0
    case_id: int = 0


@dataclass(frozen=True)
class CaseEvidence:
    kind: str
    ref_id: int | None
    note: str | None
    at: str
    id: int = 0
    case_id: int = 0


def upgrade_event_detail(detail: Any) -> Any:
    """An event's detail with one ``ok`` (older ledgers: ``ok`` and ``verified``, both needed)."""
    if not isinstance(detail, Mapping) or "verified" not in detail:
        return detail
    out = {k: v for k, v in detail.items() if k != "verified"}
    out["ok"] = bool(detail.get("ok", detail["verified"])) and bool(detail["verified"])
    return out


@dataclass(frozen=True)
class CaseEvent:
    """An action taken under a case (``revert``, ``restore``, ...); ``detail``: what it produced.

    A revert's or a restore's detail is the JSON of :mod:`servelab.core.case.model`'s
    ``RevertEvent`` or ``RestoreEvent``.
    """

    kind: str
    at: str
    #: JSON whose type depends on ``kind``: each kind's reader decodes it (a revert's, ...)
    detail: Annotated[Mapping[str, Any], BeforeValidator(upgrade_event_detail)]
    id: int = 0
    case_id: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.detail.get("ok"))


@dataclass(frozen=True)
class Resolution:
    """A case's resolution: its root cause and the verdicts it gave.

    Resolving a case again never erases the earlier resolution: it is kept as a ``resolved`` case
    event (at the earlier resolution's time) with this as its detail, ``superseded_at`` the time
    of the new one.
    """

    root_cause: str | None
    verdicts: Mapping[str, str] = field(default_factory=dict)
    superseded_at: Annotated[str | None, OMITTED_IF_NONE] = None

    KIND: ClassVar[str] = "resolved"


# -- the whole ledger ----------------------------------------------------------------------------

# The verify records read and write their own JSON (``from_row``/``to_json``) until they go
# through the codec: these make the codec call theirs where the records below hold them. A soak
# run of any age is upgraded to today's shape first.
StoredCheck = Annotated[
    CheckRecord, PlainValidator(read_check), PlainSerializer(lambda check: check.to_json())
]
_StoredVerification = Annotated[
    VerificationRecord,
    PlainValidator(VerificationRecord.from_row),
    PlainSerializer(VerificationRecord.to_json),
]
_StoredSoakRun = Annotated[SoakRunRecord, BeforeValidator(upgrade_soak_run)]


@dataclass(frozen=True)
class CaseExport(CaseRecord):
    """A case with its suspects, evidence and events, as the export nests them (the case's own
    fields first, flat)."""

    suspects: tuple[Suspect, ...] = ()
    evidence: tuple[CaseEvidence, ...] = ()
    events: tuple[CaseEvent, ...] = ()


@dataclass(frozen=True)
class LedgerExport:
    """Every record of a ledger: ``servelab ledger export``'s document, typed."""

    schema_version: int
    path: str
    deployments: tuple[DeploymentRecord, ...] = ()
    knob_changes: tuple[KnobChangeRecord, ...] = ()
    verifications: tuple[_StoredVerification, ...] = ()
    bench_runs: tuple[BenchRunRecord, ...] = ()
    ab_runs: tuple[AbRunRecord, ...] = ()
    soak_runs: tuple[_StoredSoakRun, ...] = ()
    cases: tuple[CaseExport, ...] = ()
