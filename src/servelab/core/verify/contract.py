"""verify's contract: the result of one layered verification (:class:`VerifyReport`), built by
ops, recorded by the ledger (its checks, :mod:`servelab.core.verify.record`) and rendered by
report; ``verify --json`` is its encoding plus each check's sentence."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import PlainSerializer, computed_field

from servelab.core.verify.checks import Check, Layer
from servelab.core.verify.record import FlatCheck

__all__ = ["VerifyReport"]


def _ms_precision(seconds: float) -> float:
    """Seconds as printed: to a tenth of a millisecond."""
    return round(seconds, 4)


@dataclass
class VerifyReport:
    """All checks of one verification; ``ok`` only if every check passed."""

    checks: list[FlatCheck]
    spec_hash: str
    layers: tuple[Layer, ...]
    services: list[str]
    elapsed_s: Annotated[float, PlainSerializer(_ms_precision)]
    verification_id: int | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def layer(self, name: str) -> list[Check]:
        """The checks of the layer ``name`` (a :class:`Layer`)."""
        return [check for check in self.checks if check.layer == name]

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if not check.ok]
