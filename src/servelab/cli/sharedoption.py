"""What a shared option is: one click type over one pure parser (:class:`Parsed`), one declaration
(:class:`SharedOption`: flag, destination, parser, help, default) and a command's own default with
why (:class:`Default`). :mod:`servelab.cli.options` declares every shared option with them, and
the groups a command takes them in; :mod:`servelab.cli.answeropts` and the commands that declare
an option of their own use :class:`Parsed` too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import click
from click.types import ParamTypeInfoDict

from servelab.errors import OptionError

__all__ = ["Command", "Decorator", "Default", "Parsed", "SharedOption"]

T = TypeVar("T")
#: A command function, before or after click turns it into a command.
Command = Callable[..., Any]
Decorator = Callable[[Command], Command]


class _ParsedInfo(ParamTypeInfoDict):
    parser: str


class Parsed(click.ParamType[T], Generic[T]):
    """A click type that parses with one pure parser; its :class:`OptionError` becomes click's
    ``BadParameter`` (``Invalid value for '--input-len': ...``, exit 2)."""

    def __init__(self, metavar: str, parser: Callable[[str], T]) -> None:
        self.name = metavar
        self.parser = parser

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> T:
        try:
            return self.parser(value)
        except OptionError as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        return self.name  # as written: [/v1/chat/completions|/v1/completions] stays lower case

    def to_info_dict(self) -> _ParsedInfo:
        """click's description of the type, with the parser named (two parsers never look alike)."""
        return {**super().to_info_dict(), "parser": self.parser.__qualname__}


@dataclass(frozen=True)
class Default:
    """A command's own default for a shared option, and why that command needs it (its help
    says so: ``Default here: WHY.``). ``value`` None: no value (the command works it out)."""

    value: str | None
    why: str


@dataclass(frozen=True)
class SharedOption:
    """One option as every command that takes it declares it. ``default`` is text, parsed by the
    same parser as a typed value."""

    flag: str
    dest: str
    type: Parsed[Any]
    help: str
    default: str | None = None
    #: given any number of times (the command gets a tuple of the values)
    multiple: bool = False

    def option(self, default: Default | None = None) -> Decorator:
        """The click option, with ``default`` instead of the shared one where a command needs it."""
        value = self.default if default is None else default.value
        note = "" if default is None else f" Default here: {default.why}."
        return click.option(self.flag, self.dest, type=self.type, default=value,
                            show_default=value is not None, help=self.help + note,
                            multiple=self.multiple)  # fmt: skip
