"""What a knob is: an environment variable, a server argument, a boolean flag, or a key inside a
JSON-valued argument (pure).

A knob is written as an operator writes it:

- ``SGLANG_SM120_MMA_TARGET_CTAS``: an environment variable the engine reads at start-up;
- ``--max-running-requests``: a server argument with a value (``--x 64`` or ``--x=64``);
- ``--disable-overlap-schedule``: a boolean flag, valued ``on`` or ``off`` (``true``/``false``
  are read as the same). An argument is a flag when its engine says so
  (:attr:`~servelab.core.engines.Engine.boolean_flags`) or its name says so: SGLang and
  vLLM spell every boolean ``--enable-…`` or ``--disable-…`` except the few the engine lists;
- ``--json-model-override-args.index_topk``: the key ``index_topk`` of the JSON object an
  argument holds (vLLM's own dotted form, ``--kv-transfer-config.kv_role``, reads the same).

Values are strings everywhere (as an env file holds them); a flag's are :data:`ON`/:data:`OFF`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.engines import Engine
from servelab.errors import KnobError

__all__ = [
    "OFF",
    "ON",
    "Knob",
    "KnobKind",
    "flag_value",
    "json_scalar",
    "parse_knob",
    "same_value",
]

ON = "on"
OFF = "off"
_TRUE = frozenset({"on", "true", "1", "yes"})
_FALSE = frozenset({"off", "false", "0", "no"})

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ARG_NAME = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*\Z")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


class KnobKind(StrEnum):
    """Where a knob's value goes on the engine's side."""

    ENV = "env"
    ARG = "arg"
    FLAG = "flag"
    JSON_KEY = "json_key"


@dataclass(frozen=True, slots=True)
class Knob:
    """One knob: its name as written, its kind, and for arguments the flag and the key path."""

    name: str
    kind: KnobKind
    #: The argument itself (``--json-model-override-args``); None for an env knob.
    arg: str | None = None
    #: The key path inside a JSON-valued argument (``("index_topk",)``); () otherwise.
    keys: tuple[str, ...] = ()

    @property
    def is_env(self) -> bool:
        return self.kind is KnobKind.ENV

    @property
    def field(self) -> str:
        """The argument's field name, as the engines' parsers store it and SGLang's
        ``/server_info`` reports it: ``--max-running-requests`` -> ``max_running_requests``."""
        return (self.arg or self.name).lstrip("-").replace("-", "_")

    def normalize(self, value: str | None) -> str | None:
        """``value`` as this knob stores it: a flag's ``true``/``1``/``yes`` read as ``on``."""
        if value is None or self.kind is not KnobKind.FLAG:
            return value
        return flag_value(value, self.name)


def flag_value(value: str, name: str = "a flag") -> str:
    """``on`` or ``off`` for a flag's value written any accepted way, else KnobError."""
    low = value.strip().lower()
    if low in _TRUE:
        return ON
    if low in _FALSE:
        return OFF
    raise KnobError(f"{name} is a flag: its value is on or off (true or false), not {value!r}")


def _is_flag(arg: str, engine: Engine | None) -> bool:
    if engine is not None and arg in engine.boolean_flags:
        return True
    return arg.startswith(("--enable-", "--disable-"))


def parse_knob(name: str, engine: Engine | None = None) -> Knob:
    """The knob ``name`` names (an env variable, an argument, a flag or a JSON key), else a
    KnobError that says which forms a knob takes."""
    if _ENV_NAME.match(name):
        return Knob(name, KnobKind.ENV)
    arg, dot, path = name.partition(".")
    keys = tuple(path.split(".")) if dot else ()
    if not _ARG_NAME.match(arg) or not all(_KEY.match(key) for key in keys):
        raise KnobError(
            f"not a knob: {name!r} (an env variable NAME, an argument --name, a flag "
            "--enable-x/--disable-x, or a key of a JSON-valued argument --name.key)"
        )
    if keys:
        return Knob(name, KnobKind.JSON_KEY, arg, keys)
    return Knob(name, KnobKind.FLAG if _is_flag(arg, engine) else KnobKind.ARG, arg)


def json_scalar(value: str) -> object:
    """A JSON-key knob's value as the JSON it is stored as: ``1024`` a number, ``true`` a bool,
    anything that is not a JSON literal a string."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, int | float | bool | str) or parsed is None else value


def _as_whole(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _as_number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def same_value(a: str | None, b: str | None) -> bool:
    """Two layers' values agree: equal strings, or equal numbers (``0.85`` and ``0.850``, ``64``
    and ``64.0``: an engine reports a resolved number, a file holds what was written; ``nan`` and
    ``NaN``)."""
    if a is None or b is None:
        return a is b
    if a == b:
        return True
    i, j = _as_whole(a), _as_whole(b)
    if i is not None and j is not None:  # exactly: 2**53 + 1 and 2**53 are two settings
        return i == j
    x, y = _as_number(a), _as_number(b)  # NaN in any spelling is one setting (``nan``, ``NaN``)
    return x is not None and y is not None and (x == y or (math.isnan(x) and math.isnan(y)))
