"""Where a server argument lives before the engine starts: an argument knob's file layer (pure).

A service's arguments come from up to three places the spec names, read here in the order the
engine's parser ends up giving them precedence (the command line wins over ``--config``, and on a
command line the last occurrence wins):

1. :attr:`Place.ARGS_ENV`: the words of the env-file variable ``args_env`` (split at white space,
   as systemd and ``sh`` expand an unquoted ``$NAME``), last on the command line;
2. :attr:`Place.SPEC`: the command line servelab itself builds for a ``sim`` or ``router`` service
   (its ``args``, its ``[router]`` table), before ``$args_env``. Read only: the spec is the
   operator's source, and its hash identifies every measurement made with it;
3. :attr:`Place.CONFIG_FILE`: the YAML file the engine reads with ``--config``.

:func:`file_value` says which place wins and which values it shadows; :func:`write_place` says
where ``knob set`` writes (where the knob is now, else ``args_env``, else the config file) or
refuses before anything is touched, naming where the spec says the service's arguments live.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.spec import ServiceSpec
from servelab.core.engines import Engine
from servelab.core.knob import Knob
from servelab.core.knobs.argv import abbreviations, canonical_arg, knob_value
from servelab.errors import KnobError

__all__ = [
    "PRECEDENCE",
    "FileValue",
    "LiveSource",
    "LiveValue",
    "Place",
    "abbreviated_in",
    "file_value",
    "live_value",
    "split_args",
    "write_place",
]


class Place(StrEnum):
    """A place a server argument is written before the engine starts."""

    ARGS_ENV = "args_env"
    SPEC = "spec"
    CONFIG_FILE = "config_file"


#: Highest precedence first: the engine ends up with the first place that sets the knob.
PRECEDENCE: tuple[Place, ...] = (Place.ARGS_ENV, Place.SPEC, Place.CONFIG_FILE)


@dataclass(frozen=True, slots=True)
class FileValue:
    """An argument knob's value before the start: the winning place's, and the values it hides."""

    value: str | None
    place: Place | None
    shadowed: tuple[tuple[Place, str | None], ...] = ()
    #: Where the parser's flags are not known: (place, word) for each word that is a strict
    #: prefix of the knob's flag, which the engine may take for the knob (an uncertain value).
    abbreviated: tuple[tuple[Place, str], ...] = ()


def abbreviated_in(
    sources: Mapping[Place, Mapping[str, str]], knob: Knob, engine: Engine
) -> tuple[tuple[Place, str], ...]:
    """(place, word) for each argument of the places that may be the knob's flag abbreviated
    (:func:`~servelab.core.knobs.argv.abbreviations`): the check for when the flags are not
    known."""
    return tuple(
        (place, word)
        for place in PRECEDENCE
        if place in sources
        for word in abbreviations(sources[place], knob, engine)
    )


def split_args(value: str | None) -> list[str]:
    """An ``args_env`` variable's words, split as an unquoted ``$NAME`` is (white space)."""
    return [] if value is None else value.split()


def file_value(sources: Mapping[Place, Mapping[str, str]], knob: Knob, engine: Engine) -> FileValue:
    """The knob's value from the places' parsed arguments (``{--arg: value}`` per place; a place
    that does not exist is absent). A place that does not name the argument leaves it to the
    next."""
    named = [
        (place, knob_value(sources[place], knob, engine))
        for place in PRECEDENCE
        if place in sources and _names(sources[place], knob, engine)
    ]
    if not named:
        return FileValue(knob_value({}, knob, engine), None)
    (place, value), rest = named[0], named[1:]
    return FileValue(value, place, tuple(rest))


def _names(values: Mapping[str, str], knob: Knob, engine: Engine) -> bool:
    """The place gives the argument at all (a flag's ``--no-x`` counts as giving ``--x``)."""
    assert knob.arg is not None
    return canonical_arg(knob.arg, engine) in values


def write_place(svc: ServiceSpec, where: str, current: FileValue) -> Place:
    """Where ``knob set`` writes the argument of service ``where`` (its name in messages)."""
    if current.place is not None and current.place is not Place.SPEC:
        return current.place
    if svc.args_env is not None:
        return Place.ARGS_ENV
    if svc.config_file is not None:
        return Place.CONFIG_FILE
    if current.place is Place.SPEC:
        raise KnobError(
            f"{where}: the argument is set by the spec itself (services.{where}.args or its "
            "[router] table), which servelab does not rewrite: give the service an args_env "
            "or a config_file (an args_env value comes later on the command line and wins)"
        )
    raise KnobError(
        f"{where}: the spec names no place for its arguments: give services.{where} an "
        "args_env (a variable of its env file that its start command expands) or a "
        "config_file (the YAML its engine reads with --config)"
    )


class LiveSource(StrEnum):
    """Where a running engine got an argument from: its own command line, or its ``--config``
    file (as that file reads now: the engine read it at its start), or nowhere (its default);
    ``reported``: the process writes over its own command line (sglang-router 0.3.2's
    ``sglang::router``), so the value is the one the service reports it runs with."""

    CMDLINE = "cmdline"
    CONFIG = "config"
    DEFAULT = "default"
    REPORTED = "reported"


@dataclass(frozen=True, slots=True)
class LiveValue:
    """An argument knob's value in the running process, and where the process got it."""

    value: str | None
    source: LiveSource


def live_value(
    cmdline: Mapping[str, str], config: Mapping[str, str] | None, knob: Knob, engine: Engine
) -> LiveValue:
    """The knob's value for a process with these command-line arguments and, when it was started
    with ``--config``, that file's arguments (merged under the command line, as the engine does)."""
    if _names(cmdline, knob, engine):
        return LiveValue(knob_value(cmdline, knob, engine), LiveSource.CMDLINE)
    if config is not None and _names(config, knob, engine):
        return LiveValue(knob_value(config, knob, engine), LiveSource.CONFIG)
    return LiveValue(knob_value({}, knob, engine), LiveSource.DEFAULT)
