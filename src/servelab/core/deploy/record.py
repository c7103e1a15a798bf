"""A deployment's ledger record: a bring-up, restart or stop as the ``deployments`` table holds it
(pure; stored and read through :mod:`servelab.core.ledger.codec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeploymentRecord"]


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
