"""What happened to one service in ``up``, ``down`` or ``restart``: a step's outcome (pure).

The values are stored in the ledger (a deployment's steps, a case event's ``restart``) and printed
as they are (``restart`` tables, progress lines): never change one.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RESTARTED", "StepOutcome"]

#: A step of ``up``'s that ended ok but restarted a service serving before (a router behind the
#: worker ``up`` started): the word the table and ``--json``'s ``outcome_said`` give it.
RESTARTED = "restarted"


class StepOutcome(StrEnum):
    """A started, already running, stopped or failed service."""

    OK = "ok"  # started and ready
    #: The start command outlived its timeout (or the launch command timed out, as an SSH session
    #: that would not close does), but the service answered ready: not a failure.
    TIMED_OUT_HEALTHY = "command timed out; service healthy"
    ALREADY_UP = "already up"  # running and ready before the command: left alone
    FAILED = "failed"
    STOPPED = "stopped"  # stopped at SIGTERM (or by its stop command / unit)
    KILLED = "killed"  # still there after the grace period: SIGKILL
    NOT_RUNNING = "not running"  # nothing to stop

    @property
    def ok(self) -> bool:
        return self is not StepOutcome.FAILED
