"""The one codec between typed records and the JSON they are stored and printed as (pure).

Every stored or printed shape is a frozen dataclass; :func:`encode` turns one into JSON-ready
values and :func:`decode` reads them back into the type, both through one cached pydantic
``TypeAdapter`` per type, so no record writes its own ``to_json``/``from_json`` pair. Codes are
``StrEnum`` members and are stored as their values; tuples are stored as lists; a float that is
not finite (the std of one run, an unbounded interval) is stored as ``null``, since JSON has no
NaN and a browser's ``JSON.parse`` rejects it.

Decoding is lax where JSON is lossy (a list reads as a tuple, an int as a float) and ignores keys
the type does not name. A row written by an older servelab whose shape differs is not this
module's concern: its reader (``upgrade_*`` beside the type) turns it into today's shape first.
A value that does not fit its type raises :class:`~servelab.errors.RecordError` naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from servelab.errors import RecordError

__all__ = ["decode", "encode", "finite"]

T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    """The one adapter of ``kind``, built on first use (building one costs far more than a use)."""
    found = _ADAPTERS.get(kind)
    if found is None:
        found = _ADAPTERS[kind] = TypeAdapter(kind)
    return found


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) inside it replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def encode(value: Any, kind: Any = None) -> Any:
    """``value`` (of type ``kind``, default its own class) as JSON-ready values."""
    dumped = _adapter(type(value) if kind is None else kind).dump_python(value, mode="json")
    return finite(dumped)


def decode(kind: type[T], data: Any) -> T:
    """``data`` (decoded JSON, or a JSON string) read as ``kind``; a misfit is a RecordError."""
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else data
        decoded: T = _adapter(kind).validate_python(value)
        return decoded
    except (ValidationError, ValueError) as exc:
        raise RecordError(f"not a {getattr(kind, '__name__', kind)}: {exc}") from exc
