"""Does a tool call's arguments object satisfy its JSON schema (pure; the subset probes use).

The probes' schemas (:mod:`servelab.core.answers.probes`) use JSON Schema's ``type`` (object,
string, integer, number, boolean, array), ``properties``, ``required``, ``enum`` and
``additionalProperties: false``; :func:`schema_errors` checks exactly those keywords, as JSON
Schema 2020-12 defines them (an integer is a number without a fractional part; a boolean is
neither). A keyword outside the subset is ignored, never a pass it did not check: the probes do
not use one.
"""

from __future__ import annotations

from typing import TypedDict

__all__ = ["JsonSchema", "schema_errors"]


class JsonSchema(TypedDict, total=False):
    """A JSON schema of the subset the probes use (the keywords :func:`schema_errors` checks)."""

    type: str
    properties: dict[str, JsonSchema]
    required: list[str]
    enum: list[str | int | float | bool | None]
    additionalProperties: bool


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "string": (str,),
    "array": (list,),
    "boolean": (bool,),
    "number": (int, float),
    "integer": (int, float),
}


def _type_ok(value: object, kind: str) -> bool:
    if kind not in _TYPES:
        return True
    if isinstance(value, bool) and kind != "boolean":
        return False
    if not isinstance(value, _TYPES[kind]):
        return False
    return (
        kind != "integer"
        or isinstance(value, int)
        or (isinstance(value, float) and value.is_integer())
    )


def schema_errors(value: object, schema: JsonSchema, path: str = "$") -> list[str]:
    """Where ``value`` breaks ``schema``: one short code-like string per violation (empty: it
    satisfies it)."""
    errors: list[str] = []
    kind = schema.get("type")
    if isinstance(kind, str) and not _type_ok(value, kind):
        return [f"{path}: not {kind}"]
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        errors.append(f"{path}: not in enum")
    if isinstance(value, dict):
        errors += _object_errors(value, schema, path)
    return errors


def _object_errors(value: dict[str, object], schema: JsonSchema, path: str) -> list[str]:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    errors = [f"{path}.{name}: missing" for name in (required if isinstance(required, list) else [])
              if name not in value]  # fmt: skip
    for name, item in value.items():
        if name in props and isinstance(props[name], dict):
            errors += schema_errors(item, props[name], f"{path}.{name}")
        elif schema.get("additionalProperties") is False:
            errors.append(f"{path}.{name}: not allowed")
    return errors
