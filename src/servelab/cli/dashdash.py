"""The rules of ``--`` on the commands that take a knob (``knob get|set|diff``).

A server argument is written after ``--`` so that click does not read it as an option:
``servelab knob set decode -- --max-running-requests=64``. Two rules follow:

- a bare flag after ``--`` means ``on``: ``knob set decode -- --disable-overlap-schedule`` is
  ``--disable-overlap-schedule=on`` (:func:`bare_flag_value`);
- an option of the command itself written after ``--`` (``-- --json``) is an error saying that
  options go before ``--`` (:class:`KnobCommand`), not click's "unexpected extra argument".
"""

from __future__ import annotations

from collections.abc import Iterable

import click

from servelab.core.knob import ON

__all__ = ["KnobCommand", "bare_flag_value", "misplaced_option"]


def misplaced_option(words: list[str], options: Iterable[str]) -> str | None:
    """The first word after ``--`` in ``words`` that is one of ``options`` (``--json``,
    ``--reason=x``); None when there is none."""
    if "--" not in words:
        return None
    own = set(options)
    after = words[words.index("--") + 1 :]
    return next((word for word in after if word.partition("=")[0] in own), None)


def bare_flag_value(name: str) -> str | None:
    """The value of an assignment written without ``=``: ``on`` for a flag (a word that starts
    with ``-``, only possible after ``--``), None for anything else."""
    return ON if name.startswith("-") else None


class KnobCommand(click.Command):
    """A command whose knob may come after ``--``: its own options must come before it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = [
            o
            for p in self.params
            if isinstance(p, click.Option)
            for o in (*p.opts, *p.secondary_opts)
        ]
        names += ctx.help_option_names
        word = misplaced_option(args, names)
        if word is not None:
            before = [w for w in args if w != word]
            where = before.index("--")
            fixed = " ".join([*before[:where], word, *before[where:]])
            raise click.UsageError(
                f"{word} is an option of `{ctx.command_path}`: options go before `--` "
                f"(after it comes only the knob), e.g. `{ctx.command_path} {fixed}`",
                ctx,
            )
        return super().parse_args(ctx, args)
