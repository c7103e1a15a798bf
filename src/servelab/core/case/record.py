"""A case's ledger records: the case's own row, its suspects, evidence and events (each a row of
its own table), and the case with them nested as the ledger's export holds it (pure; stored and
read through :mod:`servelab.core.ledger.codec`).

Older ledgers are read as they are (nothing is rewritten on disk): a case event whose detail
carries both ``ok`` and ``verified`` is ``ok`` only if both are (:func:`upgrade_event_detail`);
new rows store ``ok`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator

from servelab.core.deploy.putback import KnobBack
from servelab.core.knobs.invisible import escape_invisible
from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = [
    "CaseEvent",
    "CaseEvidence",
    "CaseExport",
    "CaseRecord",
    "PutBackEvent",
    "Resolution",
    "Suspect",
    "upgrade_event_detail",
]


def _shown(title: object) -> object:
    return escape_invisible(title) if isinstance(title, str) else title


@dataclass(frozen=True)
class CaseRecord:
    """A case's own row (its suspects, evidence and events are rows of their own)."""

    id: int
    at: str
    #: Read with each invisible character escaped (a bidi override U+202E stored by an older
    #: servelab, or written by hand, is shown as ``\\u202e`` in text, markdown and HTML).
    title: Annotated[str, BeforeValidator(_shown)]
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


@dataclass(frozen=True)
class PutBackEvent:
    """A case event: a ``revert``'s or ``restore``'s restart failed (``after``) and the knobs
    were put back as found: the knobs ``written`` back, the services ``restarted``,
    those left ``down``; ``ok``: as found, ``live_as_found``: every knob then read live at the
    value found (not named ``verified``: an older event's key, read into ``ok``:
    :func:`upgrade_event_detail`); ``error``: why it did not finish."""

    after: str
    written: tuple[KnobBack, ...] = ()
    restarted: tuple[str, ...] = ()
    down: tuple[str, ...] = ()
    ok: bool = False
    live_as_found: bool = False
    error: str | None = None

    KIND: ClassVar[str] = "put_back"


@dataclass(frozen=True)
class CaseExport(CaseRecord):
    """A case with its suspects, evidence and events, as the export nests them (the case's own
    fields first, flat)."""

    suspects: tuple[Suspect, ...] = ()
    evidence: tuple[CaseEvidence, ...] = ()
    events: tuple[CaseEvent, ...] = ()
