"""Whether a knob's value can be written and read back as itself (pure): the one check every
command that takes a knob's value runs before it touches anything (``knob set``, ``ab``,
``tune`` and ``tune --plan``, ``case``).

- any knob: at most :data:`MAX_VALUE_BYTES` (4 KiB) long; no newline, carriage return or NUL
  (an env file line would break), no character a terminal does not show (Unicode format and
  control characters: a zero-width space, a bidi control, a BOM, a tab: ``5\\u200b12`` looks
  like ``512``), and no digit
  but the ASCII ones (the engines' ``int`` reads the full-width ``６４`` as 64: ``６４`` and ``64``
  would be two arms of one setting; refused, one rule for every kind of knob);
- a flag (``--disable-overlap-schedule``): ``on`` or ``off``, however written (``true``, ``1``,
  ``yes``...), stored as ``on``/``off``, so ``on`` and ``true`` are one setting;
- an argument with a value (``--max-running-requests``): not empty (written as ``--x=`` it would
  read back as the bare flag, "on"), not a flag (``--x=--disable-radix-cache`` puts an argument
  the spec never declared on the command line), no white space (an ``args_env`` variable is
  split at it), and of the argument's type where the engine's parser is known
  (:data:`ARGUMENT_TYPES`: ``--chunked-prefill-size=*`` is not an ``int``), written in plain
  ASCII (``6_4`` and ``+64`` would be read as 64 too: refused), and in the argument's range
  (:data:`ARGUMENT_RANGES`: ``--max-running-requests=-4`` is refused), a whole number within
  64 bits (``99999999999999999999`` is past what the engine's tensors and counters hold).

An environment variable's or a JSON key's value is taken as written otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from servelab.core.engines import Engine
from servelab.core.knob import Knob, KnobKind, flag_value
from servelab.core.knobs.argv import canonical_arg
from servelab.core.knobs.invisible import escape_invisible, invisible_at, name_of
from servelab.errors import KnobError

__all__ = ["ARGUMENT_RANGES", "ARGUMENT_TYPES", "MAX_VALUE_BYTES", "Range", "check_value"]

#: The engines' arguments whose value has a type, as their parsers declare it (SGLang's
#: ``srt/server_args.py`` ``add_cli_args``, vLLM's ``EngineArgs``): what servelab checks a value
#: against before writing it. Any other argument's value is taken as written.
ARGUMENT_TYPES: Mapping[str, Mapping[str, type]] = {
    "sglang": {
        "--max-running-requests": int, "--max-total-tokens": int, "--max-prefill-tokens": int,
        "--chunked-prefill-size": int, "--context-length": int, "--page-size": int,
        "--tp-size": int, "--dp-size": int, "--cuda-graph-max-bs": int,
        "--mem-fraction-static": float, "--schedule-conservativeness": float,
    },
    "vllm": {
        "--max-num-seqs": int, "--max-num-batched-tokens": int, "--max-model-len": int,
        "--block-size": int, "--tensor-parallel-size": int, "--gpu-memory-utilization": float,
    },
}  # fmt: skip


@dataclass(frozen=True)
class Range:
    """The values an engine accepts for a typed argument: from ``low`` (above it only, when
    ``above``) up to ``high``."""

    low: float
    high: float = math.inf
    above: bool = False

    def holds(self, number: float) -> bool:
        return (number > self.low if self.above else number >= self.low) and number <= self.high

    def words(self) -> str:
        low = f"{'above' if self.above else 'at least'} {self.low:g}"
        return low if math.isinf(self.high) else f"{low} and at most {self.high:g}"


_COUNT = Range(1)
_FRACTION = Range(0, 1, above=True)
#: The typed arguments' ranges (the engines' parsers and their ``__post_init__`` checks;
#: ``--chunked-prefill-size=-1`` turns chunking off in SGLang). A typed argument not named here
#: takes any finite number.
ARGUMENT_RANGES: Mapping[str, Mapping[str, Range]] = {
    "sglang": {
        "--max-running-requests": _COUNT, "--max-total-tokens": _COUNT,
        "--max-prefill-tokens": _COUNT, "--chunked-prefill-size": Range(-1),
        "--context-length": _COUNT, "--page-size": _COUNT, "--tp-size": _COUNT,
        "--dp-size": _COUNT, "--cuda-graph-max-bs": _COUNT, "--mem-fraction-static": _FRACTION,
        "--schedule-conservativeness": Range(0),
    },
    "vllm": {
        "--max-num-seqs": _COUNT, "--max-num-batched-tokens": _COUNT, "--max-model-len": _COUNT,
        "--block-size": _COUNT, "--tensor-parallel-size": _COUNT,
        "--gpu-memory-utilization": _FRACTION,
    },
}  # fmt: skip
#: The longest value a knob takes, in UTF-8 bytes (an engine setting is a word or a short JSON
#: document; a longer one is a paste gone wrong, and would be written, restarted and stored).
MAX_VALUE_BYTES = 4096
#: A number as the knob commands accept it: ASCII digits, one sign, a point and an exponent.
_SYNTAX: Mapping[type, re.Pattern[str]] = {
    int: re.compile(r"-?[0-9]+\Z"),
    float: re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z|-?(nan|inf)\Z", re.I),
}

#: A value that is an option: ``-`` then anything but a digit or a dot (``-1`` and ``-.5`` are
#: numbers).
_OPTION = re.compile(r"-[^0-9.]")


def _cut(value: str) -> str:
    """``value`` quoted, cut to its first 24 characters (not 4,000 digits)."""
    return repr(value) if len(value) <= 24 else f"{value[:24]!r}… ({len(value):,} characters)"


def _typed(knob: Knob, value: str, kind: type, bounds: Range | None) -> None:
    try:
        if not _SYNTAX[kind].match(value):
            raise ValueError(value)
        number = kind(value)
    except ValueError:
        raise KnobError(
            f"{knob.name} takes {'a whole number' if kind is int else 'a number'} (the engine's "
            f"parser reads it as {kind.__name__}), not {value!r}"
        ) from None
    if not math.isfinite(number):
        raise KnobError(f"{knob.name} takes a finite number, not {value!r}")
    if kind is int and not -(2**63) <= number < 2**63:
        raise KnobError(
            f"{knob.name} takes a whole number the engine can hold (64 bits: at most "
            f"{2**63 - 1:,}), not {_cut(value)}"
        )
    if bounds is not None and not bounds.holds(number):
        raise KnobError(f"{knob.name} takes a number {bounds.words()}, not {value!r}")


def _argument(knob: Knob, value: str, engine: Engine) -> str:
    if not value.strip():
        raise KnobError(
            f"{knob.name} needs a value: an empty one would be written as the bare flag "
            "(remove the argument with --unset)"
        )
    if _OPTION.match(value):
        raise KnobError(f"{knob.name}'s value {value!r} is an option, not a value")
    if any(c.isspace() for c in value):
        raise KnobError(f"{knob.name}'s value {value!r} holds white space: the engine's "
                        "argument list would be split at it")  # fmt: skip
    flag = canonical_arg(knob.arg or knob.name, engine)
    kind = ARGUMENT_TYPES.get(engine.name, {}).get(flag)
    if kind is not None:
        _typed(knob, value, kind, ARGUMENT_RANGES.get(engine.name, {}).get(flag))
    return value


def _check_visible(knob: Knob, value: str) -> None:
    """Refuse a value holding a character a terminal does not show (zero-width, bidi control,
    BOM, control: :mod:`servelab.core.knobs.invisible`), naming it and its position."""
    found = invisible_at(value)
    if found is not None:
        at, char = found
        raise KnobError(
            f'{knob.name}: the value "{escape_invisible(value)}" holds an invisible character, '
            f"{name_of(char)}, at position {at}: type the value again without it"
        )


def check_value(knob: Knob, value: str | None, engine: Engine) -> str | None:
    """``value`` as ``knob`` stores it (a flag's ``true`` is ``on``; None: the knob removed),
    else a KnobError saying what is wrong with it (see the module docstring)."""
    if value is None:
        return None
    if len(value.encode(errors="surrogateescape")) > MAX_VALUE_BYTES:
        raise KnobError(
            f"{knob.name}: a value of {len(value.encode(errors='surrogateescape')):,} bytes: at "
            f"most {MAX_VALUE_BYTES:,} (4 KiB)"
        )
    if "\n" in value or "\r" in value or "\0" in value:
        raise KnobError(f"{knob.name}: a value cannot contain a newline or NUL")
    if any(
        "\ud800" <= c <= "\udfff" for c in value
    ):  # bytes that were not UTF-8 on the command line
        raise KnobError(f"{knob.name}: the value is not UTF-8 text")
    _check_visible(knob, value)
    if any(c.isnumeric() and not c.isascii() for c in value):
        raise KnobError(
            f"{knob.name}: {value!r} holds a digit that is not ASCII 0-9 (the engine would read "
            "it as another setting's number): write it with 0-9"
        )
    match knob.kind:
        case KnobKind.FLAG:
            return flag_value(value, knob.name)
        case KnobKind.ARG:
            return _argument(knob, value, engine)
        case KnobKind.ENV | KnobKind.JSON_KEY:
            return value
