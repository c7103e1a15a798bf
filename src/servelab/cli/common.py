"""What every CLI command shares: the console, exit codes, running a coroutine, common options,
the one spec+ledger resolver, the one target resolver and the one progress printer.

The CLI is the only layer that prints, picks exit codes and calls ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from servelab.core.target import LoadTarget, load_target
from servelab.errors import CaseError, KnobError, ServelabError, SpecError
from servelab.io.ledger import LEDGER_ENV, Ledger, resolve_ledger_path
from servelab.io.specfile import LoadedSpec, load_spec, materialize_default_env
from servelab.ops.bench import BenchProgress

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "BenchBar",
    "SpecAndLedger",
    "bench_levels",
    "console",
    "err_console",
    "error",
    "json_option",
    "ledger_option",
    "notice",
    "print_json",
    "progress",
    "progress_when",
    "resolve_target",
    "run",
    "run_with_ledger",
    "say",
    "spec_option",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Piped output (a log, `| tee`) gets 120 columns instead of rich's 80, so tables stay whole.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err_console = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def spec_option(func: F) -> F:
    """``-f/--spec PATH``: the deployment spec (default: ./servelab.toml, else the embedded one)."""
    return click.option(
        "-f",
        "--spec",
        "spec_path",
        type=click.Path(path_type=Path),
        default=None,
        help="Deployment spec (TOML). Default: ./servelab.toml, else the embedded simulated stack.",
    )(func)


def ledger_option(func: F) -> F:
    """``--ledger PATH``: where results go (else $SERVELAB_LEDGER, else the state dir's)."""
    return click.option(
        "--ledger",
        "ledger_path",
        type=click.Path(path_type=Path),
        default=None,
        help="Ledger file (default: $SERVELAB_LEDGER, else <state_dir>/ledger.db).",
    )(func)


def json_option(func: F) -> F:
    """``--json``: print one JSON document on stdout instead of tables."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)


def print_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (plain print: no rich markup, no wrapping)."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def error(exc: BaseException | str) -> None:
    """Print an error on stderr. Its text is never read as rich markup (``[services]`` stays)."""
    err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine; turn servelab errors into a message and an exit code.

    Bad input (spec, knob, case) exits 2; any other servelab error exits 1; Ctrl-C exits 130 after
    the coroutine's own cleanup (``asyncio.run`` cancels it, so its ``finally`` blocks run).
    """
    try:
        return asyncio.run(coro)
    except (SpecError, KnobError, CaseError) as exc:
        error(exc)
        raise SystemExit(EXIT_USAGE) from None
    except ServelabError as exc:
        error(exc)
        raise SystemExit(EXIT_FAILED) from None
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        raise SystemExit(EXIT_INTERRUPTED) from None


def progress(message: str) -> None:
    """The one progress printer: a dim plain-text line on stderr.

    ``message`` may hold untrusted text (service output, env values, URLs): it is printed as
    text, never read as rich markup (``[services]`` stays).
    """
    err_console.print(message, style="dim", markup=False, highlight=False, soft_wrap=True)


def _silent(_message: str) -> None:
    return None


def progress_when(show: bool) -> Callable[[str], None]:
    """:func:`progress` when ``show``, else a printer that prints nothing."""
    return progress if show else _silent


def bench_levels(event: BenchProgress) -> None:
    """Bench progress as :func:`progress` lines: one per measured level (for the A/B's arms)."""
    if event.phase == "run" and event.done == event.total:
        progress(f"  C{event.concurrency}: {event.total} requests measured")


class BenchBar:
    """Bench progress as a transient rich bar on stderr (so ``--json`` stays clean)."""

    def __init__(self, enabled: bool) -> None:
        self.bar = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            disable=not enabled,
            transient=True,
        )
        self._tasks: dict[tuple[str, int, int], Any] = {}

    def __call__(self, event: BenchProgress) -> None:
        key = (event.phase, event.concurrency, event.repeat_index)
        if event.phase == "done":
            return
        if key not in self._tasks:
            label = f"{event.phase} C{event.concurrency} #{event.repeat_index + 1}"
            self._tasks[key] = self.bar.add_task(label, total=event.total)
        self.bar.update(self._tasks[key], completed=event.done)


def notice(label: str, text: str, style: str = "yellow") -> None:
    """A labelled warning line on stderr: ``label`` styled, ``text`` printed as plain text."""
    err_console.print(Text.assemble((label, style), " ", text), soft_wrap=True)


def say(text: str) -> None:
    """A plain-text result line on stdout (never read as markup)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@dataclass
class SpecAndLedger:
    """The one resolver of ``-f/--spec`` and ``--ledger`` for every command.

    The spec: ``-f``, else ``./servelab.toml``, else the embedded default, read at most once and
    only when asked for. The ledger: ``--ledger``, else ``$SERVELAB_LEDGER``, else
    ``<state_dir>/ledger.db`` (the spec's state dir unless the caller names another one; the
    spec is not read when the ledger's place is already known).
    """

    spec_path: Path | None = None
    ledger_option: Path | None = None
    _loaded: LoadedSpec | None = field(default=None, init=False, repr=False)

    def spec(self) -> LoadedSpec:
        """The spec as loaded (no file written)."""
        if self._loaded is None:
            self._loaded = load_spec(self.spec_path)
        return self._loaded

    def deployment(self) -> LoadedSpec:
        """The spec, with the embedded default's env files created: for commands that use them."""
        loaded = self.spec()
        materialize_default_env(loaded)
        return loaded

    def ledger_path(self, state_dir: Path | None = None) -> Path:
        """Where the ledger is (``state_dir`` instead of the spec's, e.g. ``--url`` alone)."""
        if self.ledger_option is not None or os.environ.get(LEDGER_ENV, "").strip():
            return resolve_ledger_path(self.ledger_option, Path.cwd())
        return resolve_ledger_path(None, state_dir or self.spec().state_dir)

    @contextmanager
    def ledger(self, state_dir: Path | None = None) -> Iterator[Ledger]:
        """The ledger, opened (and closed after the block)."""
        with Ledger.open(self.ledger_path(state_dir)) as ledger:
            yield ledger


def resolve_target(
    where: SpecAndLedger, url: str | None
) -> tuple[LoadTarget, LoadedSpec | None, Path]:
    """The target of a load command, the spec behind it (if read) and the state dir to use.

    ``--url`` and no ``-f``: that URL, no spec read, state dir ``./.servelab``. Otherwise the
    spec's entry point (proxy, else router); ``--url`` still overrides the URL.
    """
    if url is not None and where.spec_path is None:
        return load_target(None, url), None, Path.cwd() / ".servelab"
    loaded = where.spec()
    return load_target(loaded.spec, url), loaded, loaded.state_dir


def run_with_ledger(where: SpecAndLedger, body: Callable[[Ledger], Coroutine[Any, Any, T]]) -> T:
    """:func:`run` ``body(ledger)`` with the command's ledger open around it."""

    async def main() -> T:
        with where.ledger() as ledger:
            return await body(ledger)

    return run(main())
