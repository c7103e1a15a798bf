"""Tool-call arguments the simulated model writes: JSON that satisfies the tool's schema.

PURE (every draw from a seeded :class:`random.Random` passed in). A tool's ``parameters`` is an
OpenAI function schema (JSON Schema): the arguments the model answers with are an object holding
every ``required`` property (and about half of the optional ones) with a value of the property's
type: ``enum``/``const`` respected, numbers within ``minimum``/``maximum``, arrays within
``minItems``/``maxItems``, strings within ``minLength``/``maxLength``; ``anyOf``/``oneOf`` take
their first branch, a type list its first non-null type. ``pattern`` and ``format`` are not
modelled. An empty schema gets ``arg0``... string properties (any object satisfies it).

The arguments are compact JSON cut into pieces (output tokens) of :data:`CHARS_PER_TOKEN`
characters, at most ``max_tokens`` of them (longer pieces when the text needs it). A value that
starts at or after a piece can be changed without touching the pieces before it
(:meth:`ToolArgs.diverged`, the batch nondeterminism of ``servelab.sim.answers``), and the
arguments can be broken from a piece on (:func:`garbled`, the answer-altering faults), always in
as many pieces as before. Strings are four to ten words.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHARS_PER_TOKEN",
    "ToolArgs",
    "alternative",
    "chunked",
    "garbled",
    "plan_args",
    "split_even",
    "tool_schema",
    "value_for",
]

_WORDS = (
    "alpha", "bravo", "delta", "paris", "berlin", "tokyo", "red", "blue", "green", "kernel",
    "batch", "cache", "router", "decode", "prefill", "wave", "tile", "split", "engine", "token",
)  # fmt: skip
_MAX_DEPTH = 4
#: Characters of JSON per output token (as many as a BPE tokenizer puts in one, roughly).
CHARS_PER_TOKEN = 4


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def tool_schema(tools: list[Any], name: str) -> dict[str, Any]:
    """The ``parameters`` schema of the tool called ``name`` (``{}`` when it has none)."""
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if isinstance(fn, dict) and fn.get("name") == name:
            params = fn.get("parameters")
            return params if isinstance(params, dict) else {}
    return {}


def _branch(schema: dict[str, Any]) -> dict[str, Any]:
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], dict):
            return {**{k: v for k, v in schema.items() if k != key}, **options[0]}
    return schema


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    return "array" if "items" in schema else "string"


def _bound(schema: dict[str, Any], name: str, default: float) -> float:
    value = schema.get(name)
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default
    )


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    low = int(_bound(schema, "minLength", 0))
    high = int(_bound(schema, "maxLength", 10_000))
    text = " ".join(rng.choices(_WORDS, k=rng.randint(4, 10)))
    while len(text) < low:
        text += " " + rng.choice(_WORDS)
    return text[: max(high, low)]


def _number(schema: dict[str, Any], rng: random.Random, integer: bool) -> int | float:
    """A number within the schema's bounds (``exclusive*`` kept out by one, or by 0.01)."""
    step = 1 if integer else 0.01
    low = _bound(schema, "minimum", _bound(schema, "exclusiveMinimum", -step) + step)
    high = _bound(schema, "maximum", _bound(schema, "exclusiveMaximum", low + 100 + step) - step)
    if integer:
        lo = math.ceil(low)
        return rng.randint(lo, max(lo, math.floor(high)))
    return min(max(round(rng.uniform(low, max(low, high)), 2), low), max(low, high))


def value_for(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    """A value that satisfies ``schema`` (see the module's docstring for what is modelled)."""
    schema = _branch(schema) if isinstance(schema, dict) else {}
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return rng.choice(enum)
    kind = _type(schema)
    if kind in ("integer", "number"):
        return _number(schema, rng, kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "array":
        low = int(_bound(schema, "minItems", 1))
        high = max(low, int(_bound(schema, "maxItems", low + 2)))
        items = schema.get("items", {}) if depth < _MAX_DEPTH else {"type": "string"}
        return [value_for(items, rng, depth + 1) for _ in range(rng.randint(low, high))]
    if kind == "object":
        return dict(_properties(schema, rng, depth + 1)) if depth < _MAX_DEPTH else {}
    return _string(schema, rng)


def _properties(schema: dict[str, Any], rng: random.Random, depth: int) -> list[tuple[str, Any]]:
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    required = schema.get("required")
    required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    out = []
    for name, sub in props.items():
        keep = rng.random() < 0.5  # drawn for every property, so a schema's draws line up
        if name in required or keep:
            out.append((str(name), value_for(sub, rng, depth)))
    out += [(name, "") for name in sorted(required - set(props))]  # required, undescribed
    return out


def alternative(schema: Any, value: Any, rng: random.Random) -> Any:
    """Another valid value for ``schema``, different from ``value`` where the schema allows one
    (a greedy token's second choice, inside a value)."""
    for _ in range(8):
        other = value_for(schema, rng)
        if other != value:
            return other
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value + " " + rng.choice(_WORDS)
    return value


@dataclass(frozen=True)
class ToolArgs:
    """A tool call's arguments (their properties, in order) and the schema they satisfy."""

    props: tuple[tuple[str, Any], ...]
    schema: Any

    def text(self) -> str:
        """The arguments as compact JSON, properties in order."""
        return "{" + ",".join(f"{_json(n)}:{_json(v)}" for n, v in self.props) + "}"

    def value_starts(self) -> list[int]:
        """Where each property's value starts in :meth:`text`."""
        starts, at = [], 1
        for name, value in self.props:
            at += len(_json(name)) + 1
            starts.append(at)
            at += len(_json(value)) + 1
        return starts

    def diverged(
        self, pieces: tuple[str, ...], k: int, rng: random.Random
    ) -> tuple[ToolArgs, tuple[str, ...]]:
        """The arguments, and their pieces, when piece ``k`` took its second choice: the first
        value that starts in piece ``k`` or after changes, later values are drawn again. Still
        valid for the schema; the pieces before ``k`` kept, as many pieces (the tail split
        anew, padded with JSON whitespace when it came out shorter)."""
        cut = sum(len(p) for p in pieces[:k])
        at = next((i for i, start in enumerate(self.value_starts()) if start >= cut), None)
        if at is None:
            return self, pieces
        props = _prop_schemas(self.schema)
        name, value = self.props[at]
        new = [(name, alternative(props.get(name, {}), value, rng))]
        new += [(n, value_for(props.get(n, {}), rng)) for n, _ in self.props[at + 1 :]]
        args = ToolArgs((*self.props[:at], *new), self.schema)
        tail, left = args.text()[cut:], len(pieces) - k
        if len(tail) < left:
            tail = tail[:-1] + " " * (left - len(tail)) + "}"
        return args, (*pieces[:k], *split_even(tail, left))


def split_even(text: str, n: int) -> tuple[str, ...]:
    """``text`` in ``n`` pieces of (nearly) equal length, none empty (``len(text) >= n``)."""
    size, extra = divmod(len(text), n)
    out, at = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        out.append(text[at : at + step])
        at += step
    return tuple(out)


def chunked(text: str, max_tokens: int) -> tuple[str, ...]:
    """``text`` in pieces of at least :data:`CHARS_PER_TOKEN` characters, at most
    ``max_tokens`` of them (the last one may be shorter)."""
    size = max(CHARS_PER_TOKEN, -(-len(text) // max(1, max_tokens)))
    return tuple(text[i : i + size] for i in range(0, len(text), size))


def garbled(pieces: tuple[str, ...], at: int) -> tuple[str, ...]:
    """The pieces broken from ``at`` on, as the incident's corrupted tool calls looked (a cut
    string, a stray brace): never valid JSON, as many pieces, the ones before ``at`` kept."""
    at = max(0, min(at, len(pieces) - 1))
    head, tail = "".join(pieces[:at]), "".join(pieces[at:])
    broken = tail[: max(1, len(tail) * 2 // 3)] + '"}}'
    if _parses(head + broken):
        broken += ","
    left = len(pieces) - at
    return (*pieces[:at], *split_even(broken.ljust(left, "}"), left))


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _prop_schemas(schema: Any) -> dict[str, Any]:
    schema = _branch(schema) if isinstance(schema, dict) else {}
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def plan_args(schema: Any, rng: random.Random, max_tokens: int) -> tuple[ToolArgs, tuple[str, ...]]:
    """Schema-valid arguments and their pieces, at most ``max_tokens`` of them (an empty
    schema: ``arg0``... string properties)."""
    if _prop_schemas(schema) or (isinstance(schema, dict) and schema.get("required")):
        props = tuple(_properties(_branch(schema), rng, 1))
    else:
        n_args = max(1, min(3, (max_tokens - 2) // 4))
        props = tuple((f"arg{i}", " ".join(rng.choices(_WORDS, k=2))) for i in range(n_args))
    args = ToolArgs(props, schema)
    return args, chunked(args.text(), max_tokens)
