"""Whether a knob's value can be written and read back as itself (pure): the one check every
command that takes a knob's value runs before it touches anything (``knob set``, ``ab``,
``tune`` and ``tune --plan``, ``case``).

- any knob: no newline, carriage return or NUL (an env file line would break);
- a flag (``--disable-overlap-schedule``): ``on`` or ``off``, however written (``true``, ``1``,
  ``yes``...), stored as ``on``/``off``, so ``on`` and ``true`` are one setting;
- an argument with a value (``--max-running-requests``): not empty (written as ``--x=`` it would
  read back as the bare flag, "on"), not a flag (``--x=--disable-radix-cache`` puts an argument
  the spec never declared on the command line), no white space (an ``args_env`` variable is
  split at it), and of the argument's type where the engine's parser is known
  (:data:`ARGUMENT_TYPES`: ``--chunked-prefill-size=*`` is not an ``int``).

An environment variable's or a JSON key's value is taken as written otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from servelab.core.deploy.engines import Engine
from servelab.core.knobs.argv import canonical_arg
from servelab.core.knobs.knob import Knob, KnobKind, flag_value
from servelab.errors import KnobError

__all__ = ["ARGUMENT_TYPES", "check_value"]

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

#: A value that is an option: ``-`` then anything but a digit or a dot (``-1`` and ``-.5`` are
#: numbers).
_OPTION = re.compile(r"-[^0-9.]")


def _typed(knob: Knob, value: str, kind: type) -> None:
    try:
        number = kind(value)
    except ValueError:
        raise KnobError(
            f"{knob.name} takes {'a whole number' if kind is int else 'a number'} (the engine's "
            f"parser reads it as {kind.__name__}), not {value!r}"
        ) from None
    if not math.isfinite(number):
        raise KnobError(f"{knob.name} takes a finite number, not {value!r}")


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
    kind = ARGUMENT_TYPES.get(engine.name, {}).get(canonical_arg(knob.arg or knob.name, engine))
    if kind is not None:
        _typed(knob, value, kind)
    return value


def check_value(knob: Knob, value: str | None, engine: Engine) -> str | None:
    """``value`` as ``knob`` stores it (a flag's ``true`` is ``on``; None: the knob removed),
    else a KnobError saying what is wrong with it (see the module docstring)."""
    if value is None:
        return None
    if "\n" in value or "\r" in value or "\0" in value:
        raise KnobError(f"{knob.name}: a value cannot contain a newline or NUL")
    match knob.kind:
        case KnobKind.FLAG:
            return flag_value(value, knob.name)
        case KnobKind.ARG:
            return _argument(knob, value, engine)
        case KnobKind.ENV | KnobKind.JSON_KEY:
            return value
