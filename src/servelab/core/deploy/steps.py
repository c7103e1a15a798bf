"""What ``up``, ``down`` and ``restart`` did to one service: :class:`Step` (outcome, pid, time,
evidence), and its evidence, one type per way a step ends (:data:`StepEvidence`):

- :class:`Ready`: the readiness gate of a process passed; :class:`CommandReady`: of a service a
  shell start command launched; :class:`LaunchTimeoutReady`: the launch command itself timed out
  and readiness decided;
- :class:`FoundServing`: a ready process already served the port without a pid record;
- :class:`Stopped`: what stopping it saw;
- :class:`StepFailure`: the error that failed it.

The evidence is stored as the step's ``evidence`` (``deployments.detail``, ``--json``) through the
codec: an optional key absent before stays absent (``OMITTED_IF_NONE``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import PlainSerializer, computed_field

from servelab.core.deploy.outcomes import RESTARTED, StepOutcome
from servelab.core.deploy.probe import ProbeResult
from servelab.core.ledger.codec import OMITTED_IF_NONE

__all__ = [
    "CommandReady",
    "FoundServing",
    "LaunchTimeoutReady",
    "OthersRecord",
    "PortOwner",
    "Ready",
    "Step",
    "StepEvidence",
    "StepFailure",
    "Stopped",
    "UnprovenOwner",
    "UnrecordedStop",
]


@dataclass(frozen=True)
class Ready:
    """The readiness gate passed: the last probe's answer, how many probes, where the log is
    (``host:path``)."""

    readiness: ProbeResult | None
    probes: int
    log: str


@dataclass(frozen=True)
class CommandReady(Ready):
    """The readiness gate of a service a shell start command launched: the command's exit status
    (None: still running), whether it is a foreground command, and, when it outlived its
    ``start_timeout_s`` (the step says "command timed out; service healthy"), that timeout."""

    command_exit: int | None = None
    foreground: bool = False
    command_timeout_s: Annotated[float | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class LaunchTimeoutReady(Ready):
    """The launch command itself timed out (an SSH session that would not close); readiness
    decided."""

    launch_timed_out: Literal[True] = True


@dataclass(frozen=True)
class FoundServing:
    """A ready process already serves the service's port and had no pid record; recorded again
    when it carries servelab's mark."""

    readiness: ProbeResult
    pid_source: Literal["port owner"] = "port owner"
    recorded_again: Annotated[Literal[True] | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class PortOwner:
    """A process without servelab's mark serving the port: named (its pid, and its process name,
    ``/proc/PID/comm``, when it could be read), never touched."""

    pid: int
    launched_by_servelab: Literal[False] = False
    name: Annotated[str | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class UnprovenOwner:
    """A process serving the port that cannot be told this deployment's or not (its environment
    unreadable or written over, its output not the service's log): never stopped, and the step
    fails; its pid, the port, the host it runs on, its process name when it could be read."""

    pid: int
    port: int
    host: str
    name: Annotated[str | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class UnrecordedStop:
    """A process with servelab's mark but no pid record, stopped: its pid, group and outcome."""

    pid: int
    pgid: int
    outcome: StepOutcome


@dataclass(frozen=True)
class OthersRecord:
    """The service's pid record in the state folder (``state_dir``) is another deployment's:
    two specs share the folder. Its process (``pid``) was left alone."""

    deployment: str
    pid: int
    state_dir: str


@dataclass(frozen=True)
class Stopped:
    """What stopping a service saw: the stop command's exit status, or why it did not end
    (``stop_command``: its timeout), a stranger on the port, an unrecorded process stopped, and
    the pid of one of servelab's that still serves (the step failed); another deployment's pid
    record found in a shared state folder, left alone; a port owner whose owner cannot be told
    (the step failed); why its record could not be removed once its processes were stopped."""

    stop_command_exit: Annotated[int | None, OMITTED_IF_NONE] = None
    stop_command: Annotated[str | None, OMITTED_IF_NONE] = None
    port_owner: Annotated[PortOwner | None, OMITTED_IF_NONE] = None
    unrecorded: Annotated[UnrecordedStop | None, OMITTED_IF_NONE] = None
    still_serving: Annotated[int | None, OMITTED_IF_NONE] = None
    others_record: Annotated[OthersRecord | None, OMITTED_IF_NONE] = None
    unproven_owner: Annotated[UnprovenOwner | None, OMITTED_IF_NONE] = None
    #: Why the stopped processes' pid record could not be removed (a read-only state folder):
    #: it stays, stale (its pid dead), and later commands read it as not running.
    stale_record: Annotated[str | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class StepFailure:
    """The step failed with an error (a start that did not come up, a stop that raised)."""

    error: str


#: What a step saw; its JSON is the step's ``evidence``.
StepEvidence = Ready | CommandReady | LaunchTimeoutReady | FoundServing | Stopped | StepFailure


def _ms(seconds: float) -> float:
    """Seconds as stored and printed: to the millisecond."""
    return round(seconds, 3)


@dataclass
class Step:
    """What happened to one service: outcome, pid, time taken, and the evidence (its JSON is
    the codec's: ``{"service", "outcome", "pid", "elapsed_s", "evidence"}``, and
    ``"restarted_behind"`` when ``up`` restarted it: stopped and started again, serving before,
    because the services it names were started behind it; ``"outcome_said"``, derived, is the
    outcome word the table shows: ``"restarted"`` for such a step that ended ok)."""

    service: str
    outcome: StepOutcome
    pid: int | None
    elapsed_s: Annotated[float, PlainSerializer(_ms)]
    evidence: StepEvidence
    restarted_behind: Annotated[tuple[str, ...] | None, OMITTED_IF_NONE] = None

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome_said(self) -> str:
        """The outcome as the table and ``--json`` say it: a start of ``up``'s that restarted a
        service serving before (what it depends on started behind it) is ``restarted``, never a
        plain ok; otherwise the outcome's own word."""
        if self.restarted_behind and self.outcome is StepOutcome.OK:
            return RESTARTED
        return str(self.outcome)
