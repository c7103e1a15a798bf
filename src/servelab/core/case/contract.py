"""The case commands' contract: what a revert would do (:class:`RevertPreview`) and did
(:class:`RevertOutcome`), what a restore did (:class:`RestoreOutcome`) and where a restore
would be accepted (:class:`RestoreAdvice`). Pure types built by
:mod:`servelab.ops.case.case`, printed (``--json``) as their encoding plus words
(``report/case.py``: each check's reason, the ``error`` sentence, a verification that did not
complete)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import computed_field

from servelab.core.case.model import RESTORE_VERIFIED, RestoreEvent
from servelab.core.case.revert import ConvictionTest, RevertCost
from servelab.core.deploy.putback import PutBack
from servelab.core.deploy.steps import Step
from servelab.core.knobs.contract import KnobChange
from servelab.core.verify.checks import Check
from servelab.core.verify.contract import VerifyReport

__all__ = [
    "RestoreAdvice",
    "RestoreOutcome",
    "RestoreWhose",
    "RevertOutcome",
    "RevertPreview",
    "failed_checks_of",
]


def failed_checks_of(report: VerifyReport | None) -> list[Check]:
    """The checks that failed (none when the verification did not run)."""
    return [] if report is None else report.failures


@dataclass(frozen=True)
class RevertPreview:
    """What a revert would do and cost, and what evidence would convict the knob."""

    case_id: int
    target: str
    service: str
    knob: str
    current: str | None
    revert_to: str | None
    cost: RevertCost
    conviction: ConvictionTest


@dataclass
class RevertOutcome:
    """What ``case revert`` did: the knob set back, the co-restart, the verification (None: the
    restart or the verify did not complete, ``failure`` says why), the value live after it."""

    preview: RevertPreview
    change: KnobChange
    restart: list[Step]
    verification: VerifyReport | None
    live: str | None
    event_id: int | None = None
    failure: str | None = None  # why the restart or the verify did not complete
    #: the restart failed: what putting the knob back as found did (its ``down``, ``recovery``)
    put_back: PutBack | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        verified = self.verification is not None and self.verification.ok
        return verified and self.live == self.preview.revert_to

    @property
    def failed_checks(self) -> list[Check]:
        return failed_checks_of(self.verification)


@dataclass
class RestoreOutcome:
    """What ``restore`` did: each item set back (its event), the co-restart, the verification,
    where the restore stands (``status``)."""

    case_id: int
    items: list[RestoreEvent]
    restart: list[Step]
    verification: VerifyReport | None
    status: str = ""
    event_ids: list[int] = field(default_factory=list)
    failure: str | None = None  # why the restart or the verify did not complete
    #: the restart failed: what putting the knobs back as found did (its ``down``, ``recovery``)
    put_back: PutBack | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return (bool(self.items) or self.already_restored) and all(i.ok for i in self.items)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def already_restored(self) -> bool:
        """Nothing was done: the case was restored and verified before (no knob moved since)."""
        return not self.items and self.status == RESTORE_VERIFIED

    @property
    def failed_checks(self) -> list[Check]:
        return failed_checks_of(self.verification)


@dataclass(frozen=True)
class RestoreWhose:
    """One restore plan item's revert as another deployment recorded it: that deployment, named
    against this one (``other``), and the ``-f`` words of the spec its revert ran with (``()``:
    the embedded default; None: not recorded)."""

    other: str
    spec_args: tuple[str, ...] | None


@dataclass(frozen=True)
class RestoreAdvice:
    """Where a case's restore would be accepted (issue 38: a shared ledger), seen from the
    deployment ``here`` (its name): per plan item, another deployment's revert (``whose``; None:
    this one's, or anyone's), and the ``-f`` words a ``restore`` is accepted with (``spec_args``:
    this spec's when every revert is its own; the other's spec when every revert is that one
    deployment's and its spec was recorded; None: no one command is accepted)."""

    here: str
    whose: tuple[RestoreWhose | None, ...]
    spec_args: tuple[str, ...] | None
