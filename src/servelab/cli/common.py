"""What every CLI command shares beyond :mod:`servelab.cli.boundary` (the consoles, exit codes,
``run`` and the failure boundary): the common options, the one spec+ledger resolver, the one target
resolver, and the one progress printer (an operation's events worded by
:mod:`servelab.report.progress`).

The CLI is the only layer that prints, picks exit codes and calls ``asyncio.run``. Everything
printed may hold untrusted text (log tails, HTTP bodies, env values): it is never read as rich
markup.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from servelab.cli.boundary import console, err_console, run
from servelab.core.deploy.ownership import owned_endpoints
from servelab.core.deploy.target import LoadTarget, load_target
from servelab.core.redaction import redact
from servelab.io.ledger.connection import LEDGER_ENV, resolve_ledger_path
from servelab.io.ledger.ledger import Ledger
from servelab.io.lock import Hold, Holder, hold
from servelab.io.specfile import LoadedSpec, load_spec, materialize_default_env
from servelab.report.text import level_label

if TYPE_CHECKING:  # the bench's modules cost every command (and every simulator) ~0.7 s to import
    from servelab.core.bench.contract import BenchProgress
    from servelab.core.progress import ProgressEvent

__all__ = [
    "BenchBar",
    "SpecAndLedger",
    "base_url",
    "bench_levels",
    "ledger_option",
    "notice",
    "progress",
    "progress_when",
    "resolve_target",
    "run_with_ledger",
    "say",
    "show_progress",
    "spec_option",
]

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


def progress(message: str) -> None:
    """The one progress printer: a dim plain-text line on stderr.

    ``message`` may hold untrusted text (service output, env values, URLs): it is printed as
    text, never read as rich markup (``[services]`` stays), secret-looking values redacted.
    """
    err_console.print(redact(message), style="dim", highlight=False, soft_wrap=True)


def show_progress(event: ProgressEvent) -> None:
    """An operation's progress event as a :func:`progress` line, worded by ``report/``."""
    from servelab.report.progress import describe_progress  # every feature's events: on use

    progress(describe_progress(event))


def _silent(_event: ProgressEvent) -> None:
    return None


def progress_when(show: bool) -> Callable[[ProgressEvent], None]:
    """:func:`show_progress` when ``show``, else a printer that prints nothing."""
    return show_progress if show else _silent


def bench_levels(event: BenchProgress) -> None:
    """Bench progress as :func:`progress` lines: one per measured level (for the A/B's arms)."""
    from servelab.report.progress import describe_level  # every feature's events: on use

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
            if lock.unnamed is not None:
                path, why = lock.unnamed
                notice(
                    "lock:", f"cannot write this command's name into {path} ({why}); held unnamed"
                )
            yield

    def ledger_path(self, state_dir: Path | None = None) -> Path:
        """Where the ledger is (``state_dir`` instead of the spec's, e.g. ``--url`` alone)."""
        if self.ledger_option is not None or os.environ.get(LEDGER_ENV, "").strip():
            return resolve_ledger_path(self.ledger_option, Path.cwd())
        return resolve_ledger_path(None, state_dir or self.spec().state_dir)

    @contextmanager
    def ledger(
        self, state_dir: Path | None = None, *, create: bool = True, reads_only: bool = False
    ) -> Iterator[Ledger]:
        """The ledger, opened (and closed after the block).

        ``create=False`` (commands that only read it, or need a case already in it): a ledger
        that does not exist is refused with a :class:`~servelab.errors.StoreError`, nothing made.
        ``reads_only`` (commands that only read it): an older ledger is refused, not upgraded.
        """
        path = self.ledger_path(state_dir)
        with Ledger.open(path, create=create, reads_only=reads_only) as ledger:
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
    reads_only: bool = False,
    names_down: bool = False,
) -> T:
    """:func:`run` ``body(ledger)`` with the command's ledger open around it (``create``,
    ``reads_only``: see :meth:`SpecAndLedger.ledger`); ``wait`` not None: holding the
    deployment's lock too (:meth:`SpecAndLedger.exclusive`), taken once the ledger is open (a
    ledger refused makes nothing, not even the state directory). ``names_down`` (a command that
    co-restarts and puts back): stopped by a signal where nothing said what it left, what is down
    is named, once the lock is held (:func:`servelab.cli.interrupted.naming_down`; a stop while
    waiting for another command's lock names nothing of that command's)."""
    locked = nullcontext() if wait is None else where.exclusive(wait=wait)
    with where.ledger(create=create, reads_only=reads_only) as ledger, locked:
        if not names_down:
            return run(body(ledger))
        from servelab.cli.interrupted import naming_down  # the put-back's machinery: when used

        with naming_down(where.spec):
            return run(body(ledger))
