"""A deployment's ledger record: a bring-up, restart or stop as the ``deployments`` table holds it
(pure; stored and read through :mod:`servelab.core.ledger.codec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["DeploymentRecord", "PreflightFailed"]


@dataclass(frozen=True)
class DeploymentRecord:
    """A bring-up, restart or stop of a deployment; ``detail`` is what the operation reported."""

    id: int
    at: str
    name: str
    spec_hash: str | None
    action: str
    #: JSON: the report the deploy operation wrote (its type is above this layer, in ops/deploy)
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PreflightFailed:
    """A bring-up's or restart's ``detail`` when its preflight refused it (nothing started or
    stopped): not ok, the refusal, no steps (its keys in the order stored before it was typed)."""

    ok: Literal[False]
    error: str
    preflight: Literal[True]
    steps: tuple[()]

    @classmethod
    def of(cls, error: str) -> PreflightFailed:
        return cls(False, error, True, ())
