"""Tolerant readers of decoded JSON values: a record's ``from_row``/``from_json`` uses them so that
a missing or mistyped field reads as empty or None instead of raising."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servelab.core.ledger.codec import JsonObject

__all__ = ["obj", "objs", "opt_bool", "opt_float", "opt_int", "opt_str"]


def obj(value: Any) -> JsonObject:
    return dict(value) if isinstance(value, Mapping) else {}


def objs(value: Any) -> tuple[JsonObject, ...]:
    return tuple(dict(v) for v in value or () if isinstance(v, Mapping))


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def opt_float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def opt_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)
