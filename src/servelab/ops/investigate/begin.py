"""Where ``servelab investigate`` starts: a resumed state, or a new one whose input is checked
before its case is opened (``--case`` open, ``--since verify:ID`` recorded), so bad input opens no
case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from servelab.core.investigate.events import InvestigateEvent, Resumed
from servelab.core.investigate.state import InvestigationState, read_state
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.verify.record import VerificationRecord
from servelab.errors import CaseError
from servelab.io.ledger.ledger import Ledger
from servelab.ops.case import case as cases

if TYPE_CHECKING:
    from servelab.ops.investigate.run import InvestigateConfig

__all__ = ["begin", "latest_state"]

#: The largest row id SQLite stores: a larger ``--since verify:ID`` names no verification.
_MAX_ID = 2**63 - 1
Tell = Callable[[InvestigateEvent], None]


def latest_state(ledger: Ledger, case_id: int) -> InvestigationState | None:
    """The case's newest recorded investigation state (None: never investigated)."""
    case = cases.load_case(ledger, case_id)
    found = [e for e in case.events if e.kind == InvestigationState.KIND]
    return read_state(found[-1]) if found else None


def _since_point(
    ledger: Ledger, since: str | None, before: str | None
) -> tuple[str | None, str | None]:
    """``(point, its time)``: ``verify:ID`` given, else the newest passing verification before
    ``before`` (None: none recorded)."""
    if since is not None:
        kind, _, ident = since.partition(":")
        if kind != "verify" or not ident.isascii() or not ident.isdigit():
            raise CaseError(f"--since takes verify:ID, not {since!r}")
        found = ledger.get(VerificationRecord, int(ident)) if int(ident) <= _MAX_ID else None
        if found is None:
            raise CaseError(f"no verification {ident} in {ledger.path}")
        return since, found.at
    good = [
        v for v in ledger.list(VerificationRecord) if v.ok and (before is None or v.at < before)
    ]
    newest = max(good, key=lambda v: v.id, default=None)
    return (f"verify:{newest.id}", newest.at) if newest else (None, None)


def begin(ledger: Ledger, cfg: InvestigateConfig, tell: Tell) -> InvestigationState:
    """The state to start from: resumed, or new (``--case`` checked and ``--since`` read before
    a new case is opened: bad input opens none)."""
    if cfg.resume:
        assert cfg.case_id is not None
        state = latest_state(ledger, cfg.case_id)
        if state is None:
            raise CaseError(f"case {cfg.case_id} has no investigation to resume")
        tell(Resumed(state.case_id, state.stage, len(state.decided)))
        return state
    if cfg.case_id is not None:
        case = cases.load_case(ledger, cfg.case_id)
        if case.status != "open":
            raise CaseError(f"case {cfg.case_id} is resolved; open a new case")
        since, since_at = _since_point(ledger, cfg.since, case.opened_at)
        case_id = cfg.case_id
    else:
        since, since_at = _since_point(ledger, cfg.since, None)  # before: nothing newer exists
        case_id = cases.open_case(ledger, cfg.title)
    upto = max((c.id for c in ledger.list(KnobChangeRecord)), default=0)
    return InvestigationState(case_id, cfg.symptom, upto, since, since_at)
