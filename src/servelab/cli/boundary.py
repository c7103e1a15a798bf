"""The light part of the command line: the consoles, exit codes, running a coroutine, the stop
signals, ``--json``'s failure document and the one failure boundary (:class:`ServelabGroup`).

What the top-level group and ``servelab sim`` need, without the spec, ledger and progress
machinery of :mod:`servelab.cli.common` (which costs every process that imports it about half a
second of CPU): ``servelab --help``, ``--version`` and every simulated worker start without it.

Both consoles read no rich markup: everything printed may hold untrusted text (log tails, HTTP
bodies, env values); styles are given as ``style=`` or :class:`~rich.text.Text` spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click
import uvloop

from servelab.cli.stopsignals import holding, ignoring_stop_signals, offering_second
from servelab.cli.stopsignals import received as _received
from servelab.cli.streams import KeptStreams
from servelab.core.deploy.refusals import CaseRefused, PortRefused, RunRefused, VerifyRefused
from servelab.core.redaction import clip_long, redact
from servelab.errors import (
    CaseError,
    DamagedRow,
    KnobError,
    NotALedger,
    OptionError,
    ServelabError,
    SpecError,
    TraceError,
    UrlError,
    WorkerListError,
)
from servelab.io.signalsdeferred import not_ignored
from servelab.report.jsontext import json_text
from servelab.report.refusals import refusal_words
from servelab.startup import json_command

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEBUG_ENV",
    "DEBUG_HINT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "STOP_SIGNALS",
    "Interrupted",
    "Left",
    "ServelabGroup",
    "console",
    "err_console",
    "error",
    "exit_code",
    "interruption",
    "interruption_noted",
    "json_option",
    "note_interruption",
    "print_json",
    "run",
    "said_all",
    "stop_on_signals",
    "stopped_by",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
#: The signals a command ends on as it ends on Ctrl-C (the same cleanup, record and hint), exiting
#: 128 + the signal's number: SIGINT 130, SIGTERM 143 (``kill``, systemd, a CI runner's
#: timeout), SIGHUP 129 (the terminal went away).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: Set to 1 to see the traceback of a failure (printed before its one-line message).
DEBUG_ENV = "SERVELAB_DEBUG"
DEBUG_HINT = f"re-run with {DEBUG_ENV}=1 for the traceback"
#: ``ctx.meta`` key (shared by nested contexts): the command path of a ``--json`` invocation.
_JSON_META = "servelab.json"
#: ``ctx.meta`` key: the words after ``servelab`` (a usage error before ``--json`` is read).
_ARGV_META = "servelab.argv"

#: The console of standard output, and :data:`err_console` standard error's: made on first use
#: (:func:`_consoles`, through the module's ``__getattr__``); declared here, never assigned.
console: Console
err_console: Console


@functools.cache
def _consoles() -> tuple[Console, Console]:
    """:data:`console` and :data:`err_console`, made the first time one is used: rich costs
    about 25 ms of CPU to import, which ``servelab --help`` and a simulated engine's start skip
    (``benchmarks/cli_startup.py``). Piped output (a log, ``| tee``) gets 120 columns instead of
    rich's 80, so tables stay whole."""
    from rich.console import Console

    out = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
    err = Console(
        stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 120
    )
    return out, err


def __getattr__(name: str) -> Console:
    """``console`` (stdout) and ``err_console`` (stderr): the two rich consoles, made on first
    use (:func:`_consoles`), one each for the process."""
    if name == "console":
        return _consoles()[0]
    if name == "err_console":
        return _consoles()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[_JSON_META] = ctx.command_path.partition(" ")[2] or ctx.command_path
    return value


def json_option(func: F) -> F:
    """``--json``: print one JSON document on stdout instead of tables (on failure too)."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,  # noted before any other option can fail (``--json`` may come last)
        callback=_remember_json,
        help="Print JSON for scripts (on failure: {ok: false, error, ...}).",
    )(func)


def print_json(data: Any) -> None:
    """Print a ``--json`` document on stdout (plain print: no rich markup, no wrapping): the text
    report/ rendered (:func:`~servelab.report.jsontext.json_text`), or JSON-ready values,
    printed the same way (a number that is not finite, the std of one run or an open interval:
    ``null``)."""
    sys.stdout.write(data if isinstance(data, str) else json_text(data))
    sys.stdout.flush()


def error(exc: BaseException | str) -> None:
    """Print an error on stderr. Its text is never read as rich markup (``[services]`` stays)."""
    from rich.text import Text

    _consoles()[1].print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)


class Interrupted(KeyboardInterrupt):
    """The command was stopped by ``signum`` (one of :data:`STOP_SIGNALS`), after its cleanup."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class Left:
    """What a command's interruption left (what is down, what was put back), as the command
    noted it while it stopped (:func:`note_interruption`): ``text`` is printed on stderr before
    the ``interrupted`` line; the ``--json`` failure document gets ``record`` (JSON-ready) under
    ``key`` and, unless ``down`` is None (an ``up`` or a rolling restart, whose record says what
    it did), ``down`` and ``recovery`` (one shell line, or null)."""

    text: str
    down: tuple[str, ...] | None
    recovery: str | None
    key: str
    record: object


#: What the current command's interruption left, noted while it stopped.
_left: list[Left] = []


def note_interruption(left: Left) -> None:
    """Note what the command's interruption left (see :class:`Left`)."""
    _left.append(left)


def interruption_noted() -> bool:
    """Whether the current command noted what its interruption left."""
    return bool(_left)


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """The stop signals' handler while a command runs. In :func:`run`, asyncio's own SIGINT
    handler cancels the main task (its ``finally`` blocks run) and a second signal stops at once;
    elsewhere the first stops the command where it is, and a later one (its stop under way: a
    lock being released, what it left being said) or any once its work is done
    (:func:`~servelab.cli.stopsignals.hold_from_now`) is only noted: the exit code stays the
    first's, and no cleanup is cut in half."""
    first = not _received
    handler = signal.getsignal(signal.SIGINT)
    in_loop = callable(handler) and handler not in (signal.default_int_handler, _as_ctrl_c)
    if signum != signal.SIGINT or not in_loop:  # the loop's own notes a SIGINT
        _received.append(signum)
    if in_loop and callable(handler):
        handler(signum, frame)  # the loop's reads no number
        return
    if first and not holding():
        raise Interrupted(signum)


@contextmanager
def _handling_stop_signals() -> Iterator[None]:
    """The stop signals handled by :func:`_as_ctrl_c` while a command runs (main thread only)."""
    _received.clear()
    _left.clear()
    try:
        previous = {sig: signal.signal(sig, _as_ctrl_c) for sig in not_ignored(STOP_SIGNALS)}
    except ValueError:  # not the main thread: signals are not ours to handle
        previous = {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stopped_by() -> int:
    return _received[0] if _received else signal.SIGINT


def stopped_by() -> int | None:
    """The first stop signal the current command received (None: none)."""
    return _received[0] if _received else None


def run(coro: Coroutine[Any, Any, T], *, fast: bool = False) -> T:
    """Run a coroutine. Its errors reach :class:`ServelabGroup` (one line, an exit code); a stop
    signal (:data:`STOP_SIGNALS`) exits 128 + its number after the coroutine's own cleanup
    (``asyncio.run`` cancels it, so its ``finally`` blocks run; a second signal stops at once,
    unless :func:`second_signal_to` takes it). ``fast``: on uvloop, the loop the bench client was
    measured on (docs/bench.md, "The client")."""
    before = signal.getsignal(signal.SIGINT)
    try:
        if before is _as_ctrl_c:  # asyncio's runner installs its own over the default only
            signal.signal(signal.SIGINT, signal.default_int_handler)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop if fast else None) as runner:
            try:
                return runner.run(offering_second(coro))
            except Interrupted:
                raise
            except KeyboardInterrupt:
                raise Interrupted(_stopped_by()) from None
    finally:  # the wrapped handler outlives the loop: the one before put back
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGINT, before)


@contextmanager
def stop_on_signals(stop: asyncio.Event) -> Iterator[list[int]]:
    """In a running loop, for the block: a stop signal sets ``stop`` instead of cancelling (the
    caller ends its work itself, as ``bench`` keeps its partial run); yields the signals
    received, so the caller exits as the first one says (128 + its number)."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def got(signum: int) -> None:
        received.append(signum)
        stop.set()

    previous = {sig: signal.getsignal(sig) for sig in not_ignored(STOP_SIGNALS)}
    for sig in previous:
        loop.add_signal_handler(sig, got, sig)
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)  # the loop leaves SIGTERM and SIGHUP at their defaults


def exit_code(exc: BaseException) -> int:
    """The exit code of a failure: 2 bad input (spec, knob, case, option, trace, usage, a ledger
    row that does not read as its record, a file that is not a servelab ledger, a router's worker
    list of another shape), 128 + the signal's number when a stop signal ended it (130 Ctrl-C,
    143 SIGTERM, 129 SIGHUP), else 1."""
    bad_input = (SpecError, KnobError, CaseError, OptionError, UrlError, TraceError, DamagedRow,
                 NotALedger)  # fmt: skip
    if isinstance(exc, (*bad_input, WorkerListError)):
        return EXIT_USAGE
    if isinstance(exc, click.ClickException):
        return exc.exit_code
    if isinstance(exc, Interrupted):
        return 128 + exc.signum
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_FAILED


def interruption(signum: int | None) -> str:
    """``interrupted`` (Ctrl-C, or no signal known), or ``interrupted by SIGTERM``."""
    if signum is None or signum == signal.SIGINT:
        return "interrupted"
    return f"interrupted by {signal.Signals(signum).name}"


def _interruption(exc: KeyboardInterrupt) -> str:
    return interruption(exc.signum if isinstance(exc, Interrupted) else None)


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return _interruption(exc)
    if isinstance(exc, click.ClickException):
        return clip_long(redact(exc.format_message()))
    if isinstance(exc, (RunRefused, CaseRefused, PortRefused, VerifyRefused)):  # report/ words
        return redact(refusal_words(exc.refusal))
    if isinstance(exc, ServelabError):
        return redact(str(exc))
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return redact(f"{where}{exc.strerror}")
    return redact(f"unexpected {type(exc).__name__}: {exc}")


def said_all(streams: KeptStreams, code: int | str | None) -> int | str | None:
    """The exit code of a command that ended with ``code`` and wrote through ``streams``: its own,
    unless it succeeded but lost output otherwise than to a reader that left (``> /dev/full``):
    then one line on stderr says what was lost, and 1 (a closed pipe keeps the code:
    :mod:`servelab.cli.streams`)."""
    lost = streams.unsaid()
    if code not in (EXIT_OK, None) or lost is None:
        return code
    error(_message(lost))
    return EXIT_FAILED


def _failure_json(command: str, exc: BaseException) -> dict[str, Any]:
    """The JSON document a ``--json`` command prints when it fails (with the fields the command
    noted, :func:`note_interruption`: interrupted, or failed leaving services down)."""
    doc = {
        "command": command,
        "ok": False,
        "error": _message(exc),
        "error_type": type(exc).__name__,
        "exit_code": exit_code(exc),
    }
    for left in _left:
        doc = {left.key: left.record, **doc}
        if left.down is not None:
            doc = {"down": list(left.down), "recovery": left.recovery, **doc}
    return doc


def _json_command(ctx: click.Context, exc: BaseException) -> str | None:
    """The command path of a ``--json`` invocation; for a usage error or a stop signal that
    came before the flag was read (an unknown option; the command's module still imported),
    whether ``--json`` is among the words before ``--``."""
    command = ctx.meta.get(_JSON_META)
    if command is not None or not isinstance(exc, (click.UsageError, KeyboardInterrupt)):
        return command
    words: list[str] = ctx.meta.get(_ARGV_META, [])
    if isinstance(exc, KeyboardInterrupt):  # stopped before the flag was read (its import)
        return json_command(words)
    if "--json" not in (words[: words.index("--")] if "--" in words else words):
        return None
    path = (exc.ctx or ctx).command_path
    return path.partition(" ")[2] or path


def _report_failure(ctx: click.Context, exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr (and the JSON document under ``--json``)."""
    command = _json_command(ctx, exc)
    if command is not None:
        with contextlib.suppress(OSError):  # standard output itself failed: stderr says it
            print_json(_failure_json(command, exc))
    if isinstance(exc, click.ClickException):
        return exc.exit_code  # click prints it (usage and all)
    debug = os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")
    if debug and not isinstance(exc, KeyboardInterrupt):
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, KeyboardInterrupt):
        for left in _left:
            _consoles()[1].print(left.text.rstrip(), style="yellow", soft_wrap=True)
        _consoles()[1].print(_interruption(exc), style="yellow")
    elif isinstance(exc, (ServelabError, OSError)) or debug:
        error(_message(exc))
    else:
        error(f"{_message(exc)} ({DEBUG_HINT})")
    return exit_code(exc)


class ServelabGroup(click.Group):
    """The top-level group: the one failure boundary of every command.

    Whatever a command raises (servelab errors, OS errors, anything unexpected, a stop signal)
    becomes one line on stderr and an exit code (:func:`exit_code`); SIGTERM and SIGHUP are
    handled as SIGINT is while it runs (:data:`STOP_SIGNALS`); a ``--json`` command prints its
    failure document (:func:`_failure_json`) on stdout as well. ``SERVELAB_DEBUG=1`` prints the
    traceback too. ``SystemExit`` and click's own exits pass through.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV_META] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _handling_stop_signals():
                return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise
        except click.ClickException as exc:
            exc.message = clip_long(redact(exc.message))  # type: ignore[misc]  # what was typed
            _report_failure(ctx, exc)
            raise
        except (Exception, KeyboardInterrupt) as exc:
            if not isinstance(exc, KeyboardInterrupt):
                raise SystemExit(_report_failure(ctx, exc)) from None
            with ignoring_stop_signals():  # a late one never ends it by another code
                code = _report_failure(ctx, exc)
            raise SystemExit(code) from None
