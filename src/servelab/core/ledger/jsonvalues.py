"""Plain JSON values, without pydantic: tolerant readers of decoded JSON (a stored record's reader
uses them so that a missing or mistyped field reads as None instead of raising) and
:func:`finite`, which the codec, the ``--json`` text and the ledger's files write through (JSON
has no NaN)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite", "opt_str"]


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) inside it replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
