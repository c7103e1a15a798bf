"""Tolerant readers of decoded JSON values: a stored record's reader uses them so that a missing
or mistyped field reads as None instead of raising."""

from __future__ import annotations

from typing import Any

__all__ = ["opt_str"]


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
