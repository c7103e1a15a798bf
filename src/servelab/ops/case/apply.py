"""The step a revert and a restore share (:mod:`servelab.ops.case.case`): set the knobs under the
case, co-restart the changed services and their dependents in start order
(:func:`servelab.core.deploy.topology.restart_plan`, the one restart rule), and run a layered
verify that proves the values live plus an e2e probe. A failed restart or verify comes back as
data (:attr:`Applied.error`), not raised: the knob changes are already recorded, so the case event
must record how it ended. A failed restart (the engine exits on the value, a readiness timeout)
does not leave the deployment down: the knobs are put back as found and the services brought up
again (the shared put-back, :func:`servelab.ops.deploy.putback.put_back`), and what that did, or
the services left down and the command that brings them back, is :attr:`Applied.put_back`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from servelab.core.case.events import StepFailed
from servelab.core.deploy.events import CoRestarting
from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.core.deploy.steps import Step, StepFailure
from servelab.core.deploy.topology import restart_plan
from servelab.core.knobs.contract import KnobChange
from servelab.core.knobs.events import KnobSetting
from servelab.core.verify.checks import Check
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.events import VerifyingLayers
from servelab.core.verify.record import CheckRecord
from servelab.errors import DeployError, ServelabError
from servelab.io.ledger.ledger import Ledger
from servelab.ops.context import Operation, Progress
from servelab.ops.deploy.deploy import restart as deploy_restart
from servelab.ops.deploy.putback import as_found, put_back
from servelab.ops.fileids import file_identities
from servelab.ops.knob import get_knob, set_knob
from servelab.ops.verify.verify import LAYERS, verify

__all__ = ["Applied", "apply_knobs", "check_records", "live_value"]

#: Why a knob written back after a failed restart was: the reason recorded with it.
REFUSED = "put back as found, the restart with the new value failed"


@dataclass
class Applied:
    """What :func:`apply_knobs` did: the knob changes, the restart steps, and the verify report.

    ``report`` is None when the restart or the verify did not complete; ``error`` says why.
    """

    changes: list[KnobChange]
    steps: list[Step] = field(default_factory=list)
    report: VerifyReport | None = None
    error: str | None = None
    #: the restart failed: what putting the knobs back as found did (None: it did not fail)
    put_back: PutBack | None = None

    @property
    def verification_id(self) -> int | None:
        return None if self.report is None else self.report.verification_id


async def apply_knobs(
    op: Operation,
    ledger: Ledger,
    case_id: int,
    wanted: Sequence[tuple[str, str, str | None]],
    reason: str,
    say: Progress,
) -> Applied:
    """Set the knobs, co-restart, verify. A failed restart or verify is returned, not raised:
    the knob change is already recorded, so the case event must record how it ended."""
    done = Applied([])
    found = [KnobBack(s, k, await get_knob(op, s, k)) for s, k, _v in wanted]
    async with as_found(op, found, case_id=case_id):  # a stop signal: put back, under the case
        for service, knob, value in wanted:
            say(KnobSetting(service, knob, value))
            change = await set_knob(
                op, service, knob, value, reason=reason, case_id=case_id, ledger=ledger
            )
            done.changes.append(change)
        order = restart_plan(op.spec, [s for s, _k, _v in wanted], await file_identities(op))
        try:
            done.steps = await _restart(op, ledger, order, say)
        except ServelabError as exc:  # the engine refused the value: the knobs as found, up
            say(StepFailed(str(exc)))
            done.error = str(exc)
            done.put_back = await put_back(op, found, reason=f"{reason}: {REFUSED}",
                                           failure=str(exc))  # fmt: skip
            return done
        try:
            done.report = await _verify(op, ledger, say)
        except ServelabError as exc:
            say(StepFailed(str(exc)))
            done.error = str(exc)
    return done


async def _restart(op: Operation, ledger: Ledger, order: list[str], say: Progress) -> list[Step]:
    say(CoRestarting(tuple(order)))
    report = await deploy_restart(
        op, order, verify_after=False, rollback=False, progress=say, ledger=ledger
    )
    failed = [s for s in report.steps if s.outcome == "failed"]
    if failed:
        evidence = failed[0].evidence
        why = evidence.error if isinstance(evidence, StepFailure) else "see its log"
        raise DeployError(f"restart of {failed[0].service} failed: {why}")
    return list(report.steps)


async def _verify(op: Operation, ledger: Ledger, say: Progress) -> VerifyReport:
    say(VerifyingLayers(LAYERS))
    return await verify(op, ledger=ledger, progress=say)


def check_records(checks: list[Check]) -> tuple[CheckRecord, ...]:
    """Failed checks as a case event stores them."""
    return tuple(checks)


def live_value(report: VerifyReport | None, service: str, knob: str) -> str | None:
    """The knob's value the live layer of ``report`` read (None: not read)."""
    for check in report.layer("live") if report is not None else []:
        if (check.service, check.knob) == (service, knob):
            return check.live
    return None
