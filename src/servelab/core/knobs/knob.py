"""What a knob is: its kind and its name, one identity at every layer it is read at (pure).

A knob is a setting an operator changes to tune or fix an engine. Every knob is read at the same
layers, in this order, and any layer can hold a stale copy: the file (the env file; for an argument
the spec's ``args`` or the variable that holds them; the ``--config`` YAML file) → what the service
manager loaded (a systemd unit not yet reloaded) → the live process (``/proc/PID/environ``, or
``/proc/PID/cmdline`` for an argument) → what the engine says it runs with (``/server_info``).
A check names the knob and each layer's value by the layer's name (``file``, ``live``; a layer
servelab does not read yet adds its own name, left out of the JSON while unknown).

Today every knob is an environment variable (:attr:`KnobKind.ENV`, read in the env file and in
``/proc/PID/environ``). Server arguments (``--max-running-requests``, a boolean flag, a key of a
JSON-valued argument: ``--kv-transfer-config.kv_role``) and keys of a ``--config`` file are the
next kinds: each gets a :class:`KnobKind` member and a text form of its own (an argument's text
starts with ``--``). A knob is stored and printed as its text (:data:`KnobText`), so every record
written before kinds existed reads as the env knob it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

__all__ = ["Knob", "KnobKind", "KnobText"]


class KnobKind(StrEnum):
    """What kind of setting a knob is (its text form tells it)."""

    #: An environment variable: the env file, then ``/proc/PID/environ``.
    ENV = "env"


@dataclass(frozen=True)
class Knob:
    """One knob: its ``name`` as the engine reads it, and its ``kind``."""

    name: str
    kind: KnobKind = KnobKind.ENV

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, text: str | Knob) -> Knob:
        """The knob a stored or typed text names (an env variable's name today)."""
        return text if isinstance(text, Knob) else cls(str(text))


#: A knob in a stored or printed record: its text (``"SGLANG_SM120_MMA_TARGET_CTAS"``).
KnobText = Annotated[
    Knob, BeforeValidator(Knob.parse), PlainSerializer(str, return_type=str, when_used="always")
]
