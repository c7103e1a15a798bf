"""What every CLI command shares: the console, exit codes, running a coroutine, common options.

The CLI is the only layer that prints, picks exit codes and calls ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

from servelab.errors import CaseError, KnobError, ServelabError, SpecError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "console",
    "err_console",
    "error",
    "json_option",
    "ledger_option",
    "print_json",
    "run",
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
