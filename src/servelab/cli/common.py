"""What every CLI command shares: the console, exit codes, running a coroutine, common options,
the one spec+ledger resolver, the one target resolver, the one progress printer (an operation's
events worded by :mod:`servelab.report.progress`), and the one failure boundary
(:class:`ServelabGroup`).

The CLI is the only layer that prints, picks exit codes and calls ``asyncio.run``. Both consoles
read no rich markup: everything printed may hold untrusted text (log tails, HTTP bodies, env
values); styles are given as ``style=`` or :class:`~rich.text.Text` spans.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import uvloop
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from servelab.core.deploy.ownership import owned_endpoints
from servelab.core.deploy.target import LoadTarget, load_target
from servelab.core.progress import ProgressEvent
from servelab.core.redaction import clip_long, redact
from servelab.errors import (
    CaseError,
    KnobError,
    OptionError,
    ServelabError,
    SpecError,
    TraceError,
)
from servelab.io.ledger.connection import LEDGER_ENV, resolve_ledger_path
from servelab.io.ledger.ledger import Ledger
from servelab.io.lock import Hold, Holder, hold
from servelab.io.specfile import LoadedSpec, load_spec, materialize_default_env
from servelab.report.progress import describe_level, describe_progress
from servelab.report.text import json_text, level_label

if TYPE_CHECKING:  # the bench's modules cost every command (and every simulator) ~0.7 s to import
    from servelab.core.bench.contract import BenchProgress

__all__ = [
    "DEBUG_ENV",
    "DEBUG_HINT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "STOP_SIGNALS",
    "BenchBar",
    "Interrupted",
    "ServelabGroup",
    "SpecAndLedger",
    "base_url",
    "bench_levels",
    "console",
    "err_console",
    "error",
    "exit_code",
    "interruption",
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
    "show_progress",
    "spec_option",
    "stop_on_signals",
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

# Piped output (a log, `| tee`) gets 120 columns instead of rich's 80, so tables stay whole.
console = Console(highlight=False, markup=False, width=None if sys.stdout.isatty() else 120)
err_console = Console(
    stderr=True, highlight=False, markup=False, width=None if sys.stderr.isatty() else 120
)

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
        callback=_remember_json,
        help="Print JSON for scripts (on failure: {ok: false, error, ...}).",
    )(func)


def print_json(data: Any) -> None:
    """Print a ``--json`` document on stdout (plain print: no rich markup, no wrapping): the text
    report/ rendered (:func:`~servelab.report.text.json_text`), or JSON-ready values, printed the
    same way (a number that is not finite, the std of one run or an open interval: ``null``)."""
    sys.stdout.write(data if isinstance(data, str) else json_text(data))
    sys.stdout.flush()


def error(exc: BaseException | str) -> None:
    """Print an error on stderr. Its text is never read as rich markup (``[services]`` stays)."""
    err_console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)


class Interrupted(KeyboardInterrupt):
    """The command was stopped by ``signum`` (one of :data:`STOP_SIGNALS`), after its cleanup."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The stop signals received since the current command began, first first.
_received: list[int] = []


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM's and SIGHUP's handler: what SIGINT does now. In :func:`run`, asyncio's own
    SIGINT handler cancels the main task (its ``finally`` blocks run) and a second signal stops
    at once; elsewhere the command stops where it is."""
    _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signal.SIGINT, frame)
        return
    raise Interrupted(signum)


@contextmanager
def _handling_stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP handled as SIGINT is while a command runs (main thread only)."""
    _received.clear()
    try:
        previous = {sig: signal.signal(sig, _as_ctrl_c) for sig in STOP_SIGNALS[1:]}
    except ValueError:  # not the main thread: signals are not ours to handle
        previous = {}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stopped_by() -> int:
    return _received[0] if _received else signal.SIGINT


def run(coro: Coroutine[Any, Any, T], *, fast: bool = False) -> T:
    """Run a coroutine. Its errors reach :class:`ServelabGroup` (one line, an exit code); a stop
    signal (:data:`STOP_SIGNALS`) exits 128 + its number after the coroutine's own cleanup
    (``asyncio.run`` cancels it, so its ``finally`` blocks run). ``fast``: on uvloop, the loop the
    bench client was measured on (docs/bench.md, "The client")."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if fast else None) as runner:
        try:
            return runner.run(coro)
        except Interrupted:
            raise
        except KeyboardInterrupt:
            raise Interrupted(_stopped_by()) from None


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

    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, got, sig)
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler)  # the loop leaves SIGTERM and SIGHUP at their defaults


def exit_code(exc: BaseException) -> int:
    """The exit code of a failure: 2 bad input (spec, knob, case, option, trace, usage), 128 +
    the signal's number when a stop signal ended it (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), else
    1."""
    if isinstance(exc, (SpecError, KnobError, CaseError, OptionError, TraceError)):
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
    if isinstance(exc, ServelabError):
        return redact(str(exc))
    if isinstance(exc, OSError) and exc.strerror:
        where = f"{exc.filename}: " if exc.filename else ""
        return redact(f"{where}{exc.strerror}")
    return redact(f"unexpected {type(exc).__name__}: {exc}")


def _failure_json(command: str, exc: BaseException) -> dict[str, Any]:
    """The JSON document a ``--json`` command prints when it fails."""
    return {
        "command": command,
        "ok": False,
        "error": _message(exc),
        "error_type": type(exc).__name__,
        "exit_code": exit_code(exc),
    }


def _report_failure(ctx: click.Context, exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr (and the JSON document under ``--json``)."""
    command = ctx.meta.get(_JSON_META)
    if command is not None:
        with contextlib.suppress(OSError):  # standard output itself failed: stderr says it
            print_json(_failure_json(command, exc))
    if isinstance(exc, click.ClickException):
        return exc.exit_code  # click prints it (usage and all)
    debug = os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")
    if debug and not isinstance(exc, KeyboardInterrupt):
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, KeyboardInterrupt):
        err_console.print(_interruption(exc), style="yellow")
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
            code = _report_failure(ctx, exc)
            raise SystemExit(code) from None


def progress(message: str) -> None:
    """The one progress printer: a dim plain-text line on stderr.

    ``message`` may hold untrusted text (service output, env values, URLs): it is printed as
    text, never read as rich markup (``[services]`` stays), secret-looking values redacted.
    """
    err_console.print(redact(message), style="dim", highlight=False, soft_wrap=True)


def show_progress(event: ProgressEvent) -> None:
    """An operation's progress event as a :func:`progress` line, worded by ``report/``."""
    progress(describe_progress(event))


def _silent(_event: ProgressEvent) -> None:
    return None


def progress_when(show: bool) -> Callable[[ProgressEvent], None]:
    """:func:`show_progress` when ``show``, else a printer that prints nothing."""
    return show_progress if show else _silent


def bench_levels(event: BenchProgress) -> None:
    """Bench progress as :func:`progress` lines: one per measured level (for the A/B's arms)."""
    line = describe_level(event)
    if line is not None:
        progress(line)


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
            label = f"{event.phase} {level_label(event.concurrency)} #{event.repeat_index + 1}"
            self._tasks[key] = self.bar.add_task(label, total=event.total)
        self.bar.update(self._tasks[key], completed=event.done)


def notice(label: str, text: str, style: str = "yellow") -> None:
    """A labelled warning line on stderr: ``label`` styled, ``text`` printed as plain text."""
    err_console.print(Text.assemble((label, style), " ", text), soft_wrap=True)


def say(text: str) -> None:
    """A plain-text result line on stdout (never read as markup)."""
    console.print(text, highlight=False, soft_wrap=True)


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

    @contextmanager
    def exclusive(self, *, wait: bool, kind: Hold = Hold.CHANGE) -> Iterator[None]:
        """Hold the deployment's lock (:mod:`servelab.io.lock`: its state dir and every endpoint
        it owns) for the block, as ``kind`` needs: the one place a command that changes or
        measures the deployment takes it.

        Held by another command: refused naming it, or with ``wait`` (``--wait``) one line says
        whom it waits for. A lock left by a process that died is taken over, and one line says so.
        """
        loaded = self.spec()
        name = loaded.spec.name

        def waiting(holder: Holder | None) -> None:
            who = holder.describe() if holder is not None else "another command"
            notice("waiting:", f"{who} holds deployment {name}; this command runs when it ends")

        with hold(
            loaded.state_dir,
            _command_name(),
            name=name,
            wait=wait,
            on_wait=waiting,
            kind=kind,
            endpoints=owned_endpoints(loaded.spec),
        ) as lock:
            if lock.taken_over is not None:
                notice(
                    "lock:",
                    f"took over the lock {lock.taken_over_path} from "
                    f"{lock.taken_over.describe()}, which ended without releasing it",
                )
            yield

    def ledger_path(self, state_dir: Path | None = None) -> Path:
        """Where the ledger is (``state_dir`` instead of the spec's, e.g. ``--url`` alone)."""
        if self.ledger_option is not None or os.environ.get(LEDGER_ENV, "").strip():
            return resolve_ledger_path(self.ledger_option, Path.cwd())
        return resolve_ledger_path(None, state_dir or self.spec().state_dir)

    @contextmanager
    def ledger(self, state_dir: Path | None = None, *, create: bool = True) -> Iterator[Ledger]:
        """The ledger, opened (and closed after the block).

        ``create=False`` (commands that only read it, or need a case already in it): a ledger
        that does not exist is refused with a :class:`~servelab.errors.StoreError`, nothing made.
        """
        with Ledger.open(self.ledger_path(state_dir), create=create) as ledger:
            yield ledger


def _command_name() -> str:
    """The running command's name (``servelab restart``), without its arguments."""
    ctx = click.get_current_context(silent=True)
    return ctx.command_path if ctx is not None else "servelab"


def base_url(url: str) -> str:
    """A server's base URL: ``http://h:1/v1/`` (the OpenAI SDK's convention) → ``http://h:1``."""
    url = url.rstrip("/")
    return url.removesuffix("/v1") if url.endswith("/v1") else url


def resolve_target(
    where: SpecAndLedger, url: str | None
) -> tuple[LoadTarget, LoadedSpec | None, Path]:
    """The target of a load command, the spec behind it (if read) and the state dir to use.

    ``--url`` and no ``-f``: that URL, no spec read, state dir ``./.servelab``. Otherwise the
    spec's entry point (proxy, else router); ``--url`` still overrides the URL.
    """
    url = None if url is None else base_url(url)
    if url is not None and where.spec_path is None:
        return load_target(None, url), None, Path.cwd() / ".servelab"
    loaded = where.spec()
    return load_target(loaded.spec, url), loaded, loaded.state_dir


def run_with_ledger(
    where: SpecAndLedger,
    body: Callable[[Ledger], Coroutine[Any, Any, T]],
    *,
    create: bool = True,
    wait: bool | None = None,
) -> T:
    """:func:`run` ``body(ledger)`` with the command's ledger open around it (``create``: see
    :meth:`SpecAndLedger.ledger`); ``wait`` not None: holding the deployment's lock too
    (:meth:`SpecAndLedger.exclusive`), taken once the ledger is open (a ledger refused makes
    nothing, not even the state directory)."""
    locked = nullcontext() if wait is None else where.exclusive(wait=wait)
    with where.ledger(create=create) as ledger, locked:
        return run(body(ledger))
