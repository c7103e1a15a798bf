"""The one codec between typed records and the JSON they are stored and printed as (pure).

Every stored or printed shape is a frozen dataclass; :func:`encode` turns one into JSON-ready
values and :func:`decode` reads them back into the type, both through one cached pydantic
``TypeAdapter`` per type, so no record writes its own ``to_json``/``from_json`` pair. Codes are
``StrEnum`` members and are stored as their values; tuples are stored as lists; mappings keyed by
an int (a concurrency) are stored with string keys; a float that is not finite (the std of one
run, an unbounded interval) is stored as ``null``, since JSON has no NaN and a browser's
``JSON.parse`` rejects it, and a ``null`` where the type says ``float`` reads back as NaN.

What is JSON and nothing else (a document printed, a row's column, a request body, a parsed
answer) is typed :data:`JsonObject`, which says why it is a dict: data that crosses a layer is a
typed record instead.

A field's JSON name may differ from its Python name (``Annotated[str, Field(alias="from")]``:
``from`` is a keyword); a field annotated with :data:`OMITTED_IF_NONE` (or typed ``Omitted[X]``)
is left out of the JSON while it is None. A property marked ``@computed_field`` is written too (a
derived number the JSON shows) and ignored when read.

A part stored as it was written, of any age (a bench run's config, summary and per-request
records, each a ``TypedDict`` of the keys its readers read), is typed :data:`Stored`: decoding
checks it is a JSON object and keeps it as it came, encoding writes it back as it is (its
non-finite floats as ``null``), so ``ledger export`` gives the bytes it always gave.

Decoding is lax where JSON is lossy (a list reads as a tuple, an int as a float, ``"64"`` as the
key 64) and ignores keys the type does not name. A row written by an older servelab whose shape
differs is not this module's concern: its reader (``upgrade_*`` beside the type) turns it into
today's shape first. A value that does not fit its type raises
:class:`~servelab.errors.RecordError` naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, TypeVar

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator, core_schema

from servelab.core.ledger.jsonvalues import finite
from servelab.errors import RecordError

__all__ = ["OMITTED_IF_NONE", "JsonObject", "Omitted", "Stored", "decode", "encode"]

T = TypeVar("T")

#: A JSON document: what ``json.loads`` gives and ``json.dumps`` takes. Only at the JSON edge:
#: a ``--json`` document, a ledger row's JSON column, a request body sent to an engine, a
#: response or file parsed from one; between layers a typed record crosses instead.
JsonObject = dict[str, Any]


def _is_none(value: Any) -> bool:
    return value is None


#: ``Annotated[X | None, OMITTED_IF_NONE]``: the field is left out of the JSON while it is None.
OMITTED_IF_NONE: Any = Field(exclude_if=_is_none)
#: ``Omitted[X]``: ``X | None``, left out of the JSON while it is None (a datum not known).
Omitted = Annotated[T | None, OMITTED_IF_NONE]


def _json_object(value: Any) -> Any:
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _as_is(value: Any) -> Any:
    return value


class _AsStored:
    """The schema of :data:`Stored`: a JSON object read and written as it is (its type's own
    schema is never built: it names keys for mypy and the readers, not for the codec)."""

    def __get_pydantic_core_schema__(self, _source: Any, _handler: Any) -> Any:
        return core_schema.no_info_plain_validator_function(
            _json_object, serialization=core_schema.plain_serializer_function_ser_schema(_as_is)
        )


#: ``Stored[X]`` (``X`` a ``TypedDict``): a JSON object stored as it was written, of any age.
Stored = Annotated[T, _AsStored()]

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}
_VALIDATORS: dict[Any, SchemaValidator] = {}


def _adapter(kind: Any) -> TypeAdapter[Any]:
    """The one adapter of ``kind``, built on first use (building one costs far more than a use)."""
    found = _ADAPTERS.get(kind)
    if found is None:
        found = _ADAPTERS[kind] = TypeAdapter(kind)
    return found


def _nan_if_none(value: Any) -> Any:
    return math.nan if value is None else value


_NOT_VALIDATORS = frozenset({"metadata", "serialization"})


def _null_as_nan(schema: Any) -> Any:
    """``schema`` with every float validator reading ``null`` as NaN (what :func:`encode` wrote
    for a float that was not finite); an optional float still reads ``null`` as None."""
    if isinstance(schema, list):
        return [_null_as_nan(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v if k in _NOT_VALIDATORS else _null_as_nan(v) for k, v in schema.items()}
    if out.get("type") == "float":
        return core_schema.no_info_before_validator_function(_nan_if_none, out)
    return out


def _validator(kind: Any) -> SchemaValidator:
    """The one validator of ``kind``: its adapter's, with ``null`` floats read as NaN."""
    found = _VALIDATORS.get(kind)
    if found is None:
        found = _VALIDATORS[kind] = SchemaValidator(_null_as_nan(_adapter(kind).core_schema))
    return found


def encode(value: Any, kind: Any = None) -> Any:
    """``value`` (of type ``kind``, default its own class) as JSON-ready values."""
    adapter = _adapter(type(value) if kind is None else kind)
    return finite(adapter.dump_python(value, mode="json", by_alias=True))


def decode(kind: type[T], data: Any) -> T:
    """``data`` (decoded JSON, or a JSON string) read as ``kind``; a misfit is a RecordError."""
    try:
        value = json.loads(data) if isinstance(data, str | bytes) else data
        decoded: T = _validator(kind).validate_python(value)
        return decoded
    except (ValidationError, ValueError) as exc:
        raise RecordError(f"not a {getattr(kind, '__name__', kind)}: {exc}") from exc
