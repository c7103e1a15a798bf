"""A cancelled ``up``/``restart``/rolling restart: :class:`DeployInterrupted` carries its report
(the reports themselves are the contracts of :mod:`servelab.core.deploy.contract`,
:mod:`servelab.core.restart.contract` and :mod:`servelab.ops.deploy.rolling_results`)."""

from __future__ import annotations

import asyncio

from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.ops.deploy.rolling_results import RollingReport

__all__ = ["DeployInterrupted"]


class DeployInterrupted(asyncio.CancelledError):
    """``up`` or ``restart`` was cancelled (Ctrl-C): a :class:`asyncio.CancelledError` that
    carries the report (what ``up`` stopped; what ``restart`` left down and the command that
    brings it back; which worker a rolling restart left out of the router), already recorded
    in the ledger. Catch it as ``CancelledError``."""

    def __init__(self, report: DeployReport | RestartReport | RollingReport) -> None:
        super().__init__()
        self.report = report
