"""What ``up``/``down`` (:class:`DeployReport`) and ``restart`` (:class:`RestartReport`) did:
deploy's steps, then the pair layer's or verify's checks (a composite above both), stored
(``deployments.detail``) and printed (``--json``) as their encoding; report words them. A
``down`` stopped by a signal before its report: :class:`DownLeft`."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field, PlainSerializer, computed_field

from servelab.core.deploy.steps import Step
from servelab.core.verify.checks import Check, CheckCode
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.record import FlatCheck

__all__ = ["DeployReport", "DownLeft", "RestartReport"]


def _command(argv: list[str]) -> str | None:
    """The recovery command as one shell line (None: nothing to recover)."""
    return shlex.join(argv) if argv else None


def _empty(checks: list[Check]) -> bool:
    return not checks


@dataclass(frozen=True)
class DownLeft:
    """A ``down`` stopped by a signal: the services it stopped, those still running (read from
    the pid records and processes), and ``finish``, the command that finishes it (argv)."""

    stopped: list[str]
    running: list[str]
    finish: Annotated[list[str], PlainSerializer(shlex.join)]


@dataclass
class DeployReport:
    """The result of ``up`` or ``down``; a failed ``up`` also says why and what it stopped, and
    ``pair``: the P/D pair layer's checks once everything is ready (a mismatch fails ``up``;
    left out of the JSON while empty)."""

    action: str
    steps: list[Step]
    deployment_id: int | None = None
    error: str | None = None
    interrupted: bool = False
    stopped: list[str] = field(default_factory=list)
    pair: Annotated[list[FlatCheck], Field(exclude_if=_empty)] = field(default_factory=list)
    #: A failed ``up``: the services serving before it that it restarted behind what it started
    #: and left down (left out of the JSON while empty).
    serving_before: Annotated[list[str], Field(exclude_if=_empty)] = field(default_factory=list)

    @property
    def pair_mismatches(self) -> list[Check]:
        return [check for check in self.pair if check.code is CheckCode.PAIR_MISMATCH]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        steps_ok = all(step.ok for step in self.steps) and self.error is None
        return steps_ok and not self.pair_mismatches


@dataclass
class RestartReport:
    """The result of ``restart``: its steps, the verification, and the rollback if one ran; what
    it left ``down`` and the ``recovery`` command that brings it back (printed as one line)."""

    plan: list[str]
    steps: list[Step]
    verification: VerifyReport | None = None
    backups: dict[str, str] = field(default_factory=dict)
    rollback_from: dict[str, str] = field(default_factory=dict)
    #: The same for each service's ``config_file`` (a rollback restores it too).
    config_backups: dict[str, str] = field(default_factory=dict)
    config_rollback_from: dict[str, str] = field(default_factory=dict)
    rolled_back: bool = False
    rollback_steps: list[Step] = field(default_factory=list)
    deployment_id: int | None = None
    interrupted: bool = False
    error: str | None = None
    down: list[str] = field(default_factory=list)
    recovery: Annotated[list[str], PlainSerializer(_command)] = field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def action(self) -> str:
        return "restart"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        verified = self.verification is None or self.verification.ok
        steps_ok = all(step.ok for step in self.steps) and self.error is None
        return steps_ok and verified and not self.rolled_back and not self.down
