"""A restart's contract (deploy's steps, then verify's checks: a composite above both): what
``restart`` did (:class:`RestartReport`), stored (``deployments.detail``) and printed
(``--json``) as its encoding; report words it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import PlainSerializer, computed_field

from servelab.core.deploy.steps import Step
from servelab.core.verify.contract import VerifyReport

__all__ = ["RestartReport"]


def _command(argv: list[str]) -> str | None:
    """The recovery command as one shell line (None: nothing to recover)."""
    return shlex.join(argv) if argv else None


@dataclass
class RestartReport:
    """The result of ``restart``: its steps, the verification, and the rollback if one ran; what
    it left ``down`` and the ``recovery`` command that brings it back (printed as one line)."""

    plan: list[str]
    steps: list[Step]
    verification: VerifyReport | None = None
    backups: dict[str, str] = field(default_factory=dict)
    rollback_from: dict[str, str] = field(default_factory=dict)
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
