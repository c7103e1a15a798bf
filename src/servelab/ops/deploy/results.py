"""A cancelled ``up``/``restart``/rolling restart: :class:`DeployInterrupted` carries its report;
a restart that failed once it had stopped services: :class:`RestartLeftDown` carries its report
(the reports themselves are the contracts of :mod:`servelab.core.deploy.contract`,
:mod:`servelab.core.restart.contract` and :mod:`servelab.ops.deploy.rolling_results`)."""

from __future__ import annotations

import asyncio
import shlex

from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.errors import DeployError
from servelab.ops.deploy.rolling_results import RollingReport

__all__ = ["DeployInterrupted", "RestartLeftDown"]


class DeployInterrupted(asyncio.CancelledError):
    """``up`` or ``restart`` was cancelled (Ctrl-C): a :class:`asyncio.CancelledError` that
    carries the report (what ``up`` stopped; what ``restart`` left down and the command that
    brings it back; which worker a rolling restart left out of the router), already recorded
    in the ledger. Catch it as ``CancelledError``."""

    def __init__(self, report: DeployReport | RestartReport | RollingReport) -> None:
        super().__init__()
        self.report = report


class RestartLeftDown(DeployError):
    """A restart failed after it had stopped services (a pid record, a log or the ledger could
    not be written, a host stopped answering): a :class:`~servelab.errors.DeployError` that
    carries the report (its ``error``, the services it left ``down`` and the ``recovery``
    command that brings them back), recorded in the ledger unless the ledger is what failed.
    Its message names all three, as an interrupted restart's line does."""

    def __init__(self, report: RestartReport) -> None:
        down, back = ", ".join(report.down), shlex.join(report.recovery)
        super().__init__(
            f"restart failed: {report.error}; down: {down}; bring them back with: {back}"
        )
        self.report = report
