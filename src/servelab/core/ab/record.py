"""An A/B's ledger record, as the ``ab_runs`` table holds it (pure; stored and read through
:mod:`servelab.core.ledger.codec`). Older rows' results are upgraded as they are read
(:func:`~servelab.core.ab.result.upgrade_ab_result`); nothing is rewritten on disk."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo

from servelab.core.ab.result import AbNames, AbResult, upgrade_ab_result
from servelab.core.ledger.jsonvalues import opt_str

__all__ = ["AbRunRecord"]


def _ab_result_of_row(doc: Any, info: ValidationInfo) -> Any:
    """An ``ab_runs`` row's result in today's shape, named by its row where it does not name
    itself (:func:`~servelab.core.ab.result.upgrade_ab_result`)."""
    row = info.data
    config = row.get("config")
    service, knob = opt_str(row.get("service")), opt_str(row.get("knob"))
    sides = ("baseline", "candidate")
    compared = [opt_str(config.get(k)) if isinstance(config, Mapping) else None for k in sides]
    return upgrade_ab_result(doc, AbNames(service, knob, *compared))


@dataclass(frozen=True)
class AbRunRecord:
    """A recorded A/B: the config it ran with and its result (older shapes upgraded)."""

    id: int
    at: str
    service: str
    knob: str
    #: JSON: the A/B's config as it ran (its type, ops' AbConfig, is above this layer)
    config: Mapping[str, Any]
    result: Annotated[AbResult, BeforeValidator(_ab_result_of_row)]
