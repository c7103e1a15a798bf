"""Leave the deployment as a command found it when a stop signal ends the command midway.

``case test``, ``case revert``/``restore``, ``case bisect``, ``ab`` and ``tune`` change knobs and
co-restart services (the changed services and their dependents, in start order). A stop signal
(Ctrl-C, SIGTERM, SIGHUP, unless ignored at start: the task cancelled) can land anywhere: between
a knob's write and its restart, the router stopped and the decode starting, an arm's measurement.
:func:`as_found` wraps such a block: on a cancellation it runs :func:`put_back` and raises
:class:`PutBackInterrupted` carrying what it did (:class:`~servelab.core.deploy.putback.PutBack`),
so the CLI says it (text and ``--json``) and exits 128 + the signal.

:func:`put_back` writes each knob back (recorded as ``knob set`` records; under the case, for a
case's changes: ``case_id``), then co-restarts the services (and their dependents) when one is
down or runs another value than found. Before it starts anything, what the interrupted step
started is stopped and each port is free (:func:`~servelab.ops.deploy.settle.settle`). It runs in
a task of its own with the stop signals taken over: a second signal cancels the put-back itself
(never a ``KeyboardInterrupt`` in the middle of a write; a knob's write it cuts has its file
read back: written back when it holds the value found), and the result names exactly the
services left down and the command that brings them back (``servelab up -f SPEC``). What is
down, and which knob a running service still holds at another value than its file, is then read
as ``knob diff`` reads it, never assumed (:func:`still_live`: a router by what it says it routes
with, else not read back); one still running another value is put back with ``servelab restart``.

A put-back a failure started (``failure``: an arm's restart that did not come up, a refused
value) holds the first signal (the second stops it), then hands it to the command's handler (exit
128 + the signal) and raises :class:`PutBackInterrupted` carrying the failure too.

A second signal can also come before the put-back has taken the signals over (while the
cancellation unwinds the step it cut). Each :func:`as_found` block, while open, is listed in the
command's :func:`watching_put_backs` (the stop net's, :func:`servelab.cli.interrupted.naming_down`,
which gives that signal to :func:`second_signal`): the signal is taken, and the put-back, when
it starts, does nothing but read and say what is left, as one a second signal stopped does. A
third signal stops the command at once; a block whose put-back never ended is still listed
then, and :func:`left_as_is` reads what it left (knobs not back in their files, services down or
still running another value) as an interrupted put-back says it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.case.events import KnobPuttingBack
from servelab.core.deploy.putback import KnobBack, PutBack, StillLive
from servelab.core.deploy.spec import start_order
from servelab.core.deploy.topology import restart_plan
from servelab.core.knob import OFF, KnobKind, same_value
from servelab.core.knobs.contract import KnobDiff
from servelab.core.restart.contract import RestartReport
from servelab.errors import DeployError, ServelabError
from servelab.io.signalsdeferred import not_ignored
from servelab.io.specfile import LoadedSpec
from servelab.ops.arguments import argument_knob
from servelab.ops.context import Operation
from servelab.ops.deploy.deploy import restart
from servelab.ops.deploy.results import DeployInterrupted
from servelab.ops.deploy.services import tolerant
from servelab.ops.deploy.settle import settle
from servelab.ops.deploy.upcheck import not_ready, recovery_up
from servelab.ops.fileids import file_identities
from servelab.ops.knob import get_knob, live_knob, not_as_file, set_knob
from servelab.ops.sharedfile import read_back

__all__ = [
    "REASON",
    "PutBackInterrupted",
    "Unended",
    "as_found",
    "left_as_is",
    "put_back",
    "second_signal",
    "still_live",
    "watching_put_backs",
]

#: The reason recorded with each knob written back.
REASON = "put back as found: the command was stopped by a signal"
#: The signals a put-back takes over while it runs (a second one stops it).
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class PutBackInterrupted(asyncio.CancelledError):
    """A command was stopped by a signal and put the deployment back (or could not finish):
    a :class:`asyncio.CancelledError` that carries the
    :class:`~servelab.core.deploy.putback.PutBack`. Catch it as ``CancelledError``."""

    def __init__(self, put_back: PutBack) -> None:
        super().__init__()
        self.put_back = put_back


@dataclass(eq=False, slots=True)
class Unended:
    """An open :func:`as_found` block: the deployment, the knobs as found, and whether a second
    signal came before its put-back started (then it only reads what is left)."""

    loaded: LoadedSpec
    found: tuple[KnobBack, ...]
    stopped: bool = False


#: The command's open :func:`as_found` blocks (None: nobody watches them).
_OPEN: ContextVar[list[Unended] | None] = ContextVar("servelab_open_put_backs", default=None)


@contextlib.contextmanager
def watching_put_backs() -> Iterator[list[Unended]]:
    """For the block (around the command's event loop, whose tasks copy this context): every
    :func:`as_found` block opened is listed in the list yielded until it ends (left, or its
    put-back done); what is still listed after a stop was never put back."""
    opened: list[Unended] = []
    token = _OPEN.set(opened)
    try:
        yield opened
    finally:
        _OPEN.reset(token)


def second_signal(opened: list[Unended]) -> bool:
    """A second stop signal, before any put-back of ``opened`` took the signals over: taken
    (True) when a block is open, each put-back to start stopped; else not (False)."""
    for entry in opened:
        entry.stopped = True
    return bool(opened)


@contextlib.asynccontextmanager
async def as_found(
    op: Operation, found: Sequence[KnobBack], *, case_id: int | None = None
) -> AsyncIterator[None]:
    """For the block: cancelled (a stop signal), ``found`` is put back (:func:`put_back`, under
    case ``case_id``) and :class:`PutBackInterrupted` raised, carrying what was done. Other
    errors pass untouched. Open, the block is listed in :func:`watching_put_backs`' list; a
    ``KeyboardInterrupt`` through it (a second signal before the put-back's takeover) leaves it
    there."""
    opened, entry = _OPEN.get(), Unended(op.loaded, tuple(found))
    if opened is not None:
        opened.append(entry)
    try:
        yield
    except PutBackInterrupted:
        _ended(opened, entry)
        raise  # an inner block put back already
    except asyncio.CancelledError as exc:
        done = await put_back(op, found, left_down=_left_down(exc), stopped=entry.stopped,
                              case_id=case_id)  # fmt: skip
        _ended(opened, entry)
        raise PutBackInterrupted(done) from exc
    except Exception:
        _ended(opened, entry)
        raise
    _ended(opened, entry)


def _ended(opened: list[Unended] | None, entry: Unended) -> None:
    if opened is not None and entry in opened:
        opened.remove(entry)


async def left_as_is(unended: Sequence[Unended]) -> PutBack | None:
    """What the put-backs ``unended`` never ran left, read as an interrupted put-back reads it
    (:meth:`_PutBack._result`): the knobs not back in their files (with the ``knob set`` that
    writes each back), the services down or still running another value, and the command that
    fixes them. None when there is nothing to read (no block left open)."""
    if not unended:
        return None
    found: dict[tuple[str, str], KnobBack] = {}
    for entry in unended:  # the outermost block's value first: the one the command found
        for knob in entry.found:
            found.setdefault((knob.service, knob.knob), knob)
    async with Operation(unended[0].loaded) as op:
        down = await not_ready(op, start_order(op.spec))
        job = _PutBack(op, tuple(found.values()), down)
        job.down = set(down)
        return await job._result(interrupted=True)


def _left_down(exc: BaseException) -> tuple[str, ...]:
    """The services an interrupted ``restart`` left down (none when no restart was cut)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, DeployInterrupted) and isinstance(seen.report, RestartReport):
            return tuple(seen.report.down)
        seen = seen.__cause__ or seen.__context__
    return ()


async def put_back(
    op: Operation,
    found: Sequence[KnobBack],
    *,
    left_down: Sequence[str] = (),
    reason: str = REASON,
    failure: str | None = None,
    stopped: bool = False,
    case_id: int | None = None,
) -> PutBack:
    """Put ``found`` back and the services up (see the module docstring), each knob written back
    recorded with ``reason``; what it could not do is in the result. ``failure``: the error that
    started it (None: a stop signal did); then a first signal is held and, once the put-back
    ended, :class:`PutBackInterrupted` raised (the only thing it raises). ``stopped``: a second
    signal came before it started: nothing is put back, what is left is read and said.
    ``case_id``: the case whose changes it puts back (each knob written back recorded under it)."""
    job = _PutBack(op, tuple(found), left_down, reason=reason, stopped=stopped, case_id=case_id)
    work = asyncio.get_running_loop().create_task(job.run())
    held: list[int] | None = None if failure is None else []
    with _signals_cancel(work, held) as previous:
        try:
            done = await asyncio.shield(work)
        except asyncio.CancelledError:  # cancelled from outside: stop the put-back, say so
            work.cancel()
            done = await work
    if held:  # one signal came during a failure's put-back: it finished; now stop as it says
        done = replace(done, failure=failure)
        _hand_over(held[0], previous.get(held[0]))
        with contextlib.suppress(asyncio.CancelledError):  # the command's own cancellation
            await asyncio.sleep(0)
        raise PutBackInterrupted(done)
    return done


def _hand_over(signum: int, handler: Any) -> None:
    """``signum`` given to ``handler``, the one there before the put-back (the command's: it
    cancels the command and notes the signal for its exit code)."""
    if callable(handler) and handler is not signal.default_int_handler:
        handler(signum, None)


@contextlib.contextmanager
def _signals_cancel(
    task: asyncio.Task[PutBack], held: list[int] | None = None
) -> Iterator[dict[int, Any]]:
    """For the block, a stop signal cancels ``task`` (main thread only; the handlers there
    before are put back after, and yielded). ``held`` (a failure's put-back): the first signal
    is only noted there, the second cancels."""
    loop = asyncio.get_running_loop()
    previous: dict[int, Any] = {}

    def stop(signum: int) -> None:
        if held is not None and not held:
            held.append(signum)
            return
        task.cancel()

    for sig in not_ignored(_STOP_SIGNALS):
        handler = signal.getsignal(sig)
        try:
            loop.add_signal_handler(sig, stop, sig)
        except (ValueError, RuntimeError, NotImplementedError):  # not ours to handle here
            continue
        previous[sig] = handler
    try:
        yield previous
    finally:
        for signum, handler in previous.items():
            loop.remove_signal_handler(signum)
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@dataclass
class _PutBack:
    """One put-back's state: what is written, what is known down."""

    op: Operation
    found: tuple[KnobBack, ...]
    left_down: Sequence[str]
    reason: str = REASON
    stopped: bool = False
    case_id: int | None = None
    written: list[KnobBack] = field(default_factory=list)
    restarted: tuple[str, ...] = ()
    down: set[str] = field(default_factory=set)

    async def run(self) -> PutBack:
        self.down = set(self.left_down)
        self.op = self.op.derive(progress=tolerant(self.op.say))
        if self.stopped:  # a second signal before it started: what is left, read
            return await self._result(interrupted=True)
        try:
            await self._write()
            await self._restart()
        except DeployInterrupted as exc:  # a second signal, during the co-restart
            if isinstance(exc.report, RestartReport):
                self._after(exc.report)
            return await self._result(interrupted=True)
        except asyncio.CancelledError:  # a second signal, before or after it
            return await self._result(interrupted=True)
        except ServelabError as exc:
            self.down |= set(await self._not_ready())
            return await self._result(error=str(exc))
        return await self._result()

    async def _write(self) -> None:
        for knob in self.found:
            if await get_knob(self.op, knob.service, knob.knob) != knob.value:
                self.op.say(KnobPuttingBack(knob.service, knob.knob, knob.value))
                try:
                    await set_knob(self.op, knob.service, knob.knob, knob.value,
                                   reason=self.reason, case_id=self.case_id)  # fmt: skip
                except asyncio.CancelledError:  # a second signal: its file read back
                    with contextlib.suppress(asyncio.CancelledError):
                        if await self._as_found(knob):
                            self.written.append(knob)
                    raise
                self.written.append(knob)

    async def _restart(self) -> None:
        services = list(dict.fromkeys(knob.service for knob in self.found))
        plan = restart_plan(self.op.spec, services, await file_identities(self.op))
        if not services or not await self._needed(plan):
            return
        self.down |= set(plan)  # stopped from here on, until started again
        await settle(self.op, plan)  # what the interrupted step started: stopped, ports free
        report = await restart(self.op, services, verify_after=False)
        self._after(report)
        if not report.ok:
            failed = ", ".join(step.service for step in report.steps if not step.ok)
            raise DeployError(f"{failed or 'a service'} did not start again")

    def _after(self, report: RestartReport) -> None:
        started = {step.service for step in report.steps if step.ok}
        self.down = (self.down - started) | set(report.down)
        self.restarted = tuple(name for name in report.plan if name in started)

    async def _needed(self, plan: list[str]) -> bool:
        """A service of ``plan`` down or not ready, or a knob live at another value."""
        if self.down or await self._not_ready(plan):
            return True
        for knob in self.found:
            if not same_value(await live_knob(self.op, knob.service, knob.knob), self._live(knob)):
                return True
        return False

    def _live(self, knob: KnobBack) -> str | None:
        """The value the process shows for ``knob``: a flag's as ``on``/``off`` (unset: off)."""
        parsed = argument_knob(self.op, knob.knob)
        if parsed.kind is KnobKind.FLAG and knob.value is None:
            return OFF
        return parsed.normalize(knob.value)

    async def _not_ready(self, plan: Sequence[str] | None = None) -> list[str]:
        """The services of ``plan`` (default: of the knobs) whose readiness is not 200."""
        if plan is None:
            plan = restart_plan(self.op.spec, [knob.service for knob in self.found],
                                await file_identities(self.op))  # fmt: skip
        return await not_ready(self.op, plan)

    async def _result(self, *, interrupted: bool = False, error: str | None = None) -> PutBack:
        still: tuple[StillLive, ...] = ()
        if interrupted or error is not None:  # cut midway: what runs is read, never assumed
            with contextlib.suppress(asyncio.CancelledError):  # a third signal: what is known
                self.down, still = await self._as_it_runs()
        down = tuple(name for name in start_order(self.op.spec) if name in self.down)
        written = {(k.service, k.knob) for k in self.written}
        unsure = [k for k in self.found if (k.service, k.knob) not in written]
        not_written = tuple([k for k in unsure if not await self._as_found(k)])
        recovery: tuple[str, ...] = ()
        back = {(k.service, k.knob): k for k in not_written}
        # Restarted: a service running another value than its file, but for a knob that runs
        # the value found (its fix writes the file back to it), and one whose knob, once written
        # back, it does not run yet.
        stale = [s.service for s in still if not self._runs_fix(s, back.get((s.service, s.knob)))]
        stale += [k.service for k in not_written
                  if k.service not in down and not await self._runs_found(k)]  # fmt: skip
        if stale:  # a restart of those services applies their files and starts what is down
            stale = list(dict.fromkeys(stale))
            plan = restart_plan(self.op.spec, stale, await file_identities(self.op))
            stale += [name for name in down if name not in plan]
            recovery = ("servelab", "restart", *self.op.loaded.spec_args, *stale)
        elif down:
            recovery = tuple(recovery_up(self.op.loaded))
        fixes = tuple(self._fix(knob) for knob in not_written)
        verified = not (interrupted or error or down or not_written) and await self._verified()
        return PutBack(tuple(self.written), self.restarted, down, recovery, not_written, fixes,
                       error, interrupted, still, verified=verified)  # fmt: skip

    async def _as_it_runs(self) -> tuple[set[str], tuple[StillLive, ...]]:
        """(the services down, the knobs a running one holds at another value than its file),
        read from the processes: of the services known down and the knobs' restart plan."""
        same = await file_identities(self.op)
        plan = restart_plan(self.op.spec, [knob.service for knob in self.found], same)
        looked = [name for name in start_order(self.op.spec) if name in self.down or name in plan]
        down = set(await self._not_ready(looked))
        still: list[StillLive] = []
        for name in looked:
            if name not in down:
                still += await still_live(self.op, name)
        return down, tuple(still)

    async def _verified(self) -> bool:
        """Every knob live at the value found, every service of the plan ready."""
        with contextlib.suppress(ServelabError):
            for knob in self.found:
                live = await live_knob(self.op, knob.service, knob.knob)
                if not same_value(live, self._live(knob)):
                    return False
            return not await self._not_ready()
        return False

    def _fix(self, knob: KnobBack) -> tuple[str, ...]:
        """The ``knob set`` command that writes ``knob`` back."""
        command = ("servelab", "knob", "set", *self.op.loaded.spec_args)
        if knob.value is None:
            return (*command, "--unset", knob.service, knob.knob)
        setting = f"{knob.knob}={knob.value}"
        dashes = ("--",) if knob.knob.startswith("-") else ()
        return (*command, knob.service, *dashes, setting)

    def _runs_fix(self, still: StillLive, knob: KnobBack | None) -> bool:
        """``still`` is a knob not written back whose service runs the value found."""
        return knob is not None and still.read and same_value(still.live, self._live(knob))

    async def _runs_found(self, knob: KnobBack) -> bool:
        """``knob``'s service runs the value found (False: another, or not read)."""
        with contextlib.suppress(ServelabError):
            live = await live_knob(self.op, knob.service, knob.knob)
            return same_value(live, self._live(knob))
        return False

    async def _as_found(self, knob: KnobBack) -> bool:
        with contextlib.suppress(ServelabError):
            return await get_knob(self.op, knob.service, knob.knob) == knob.value
        return False


async def still_live(op: Operation, service: str) -> list[StillLive]:
    """The declared knobs running ``service`` holds at another value than its file, as ``knob
    diff`` reads them, saying only what was read: a router writes over its command line and
    environment (``sglang::router``), so a value not found there is not "unset": an argument
    is read from what the router reports it runs with (its policy), and one it has not
    reported (yet) is :attr:`~servelab.core.deploy.putback.StillLive.read` False, never a value.
    Empty when it runs as its files say, is not running, or cannot be read at all."""
    with contextlib.suppress(ServelabError):
        return [s for d in await not_as_file(op, service)
                if (s := await _as_read(op, service, d)) is not None]  # fmt: skip
    return []


async def _as_read(op: Operation, service: str, diff: KnobDiff) -> StillLive | None:
    """``diff`` as far as it was read (None: the router reports the file's value)."""
    said = await read_back(op, service, argument_knob(op, diff.name), diff.live)
    if not said.known:
        return StillLive(service, diff.name, None, diff.file, read=False)
    if said.where and same_value(said.value, diff.file):  # the router's own report
        return None
    return StillLive(service, diff.name, said.value, diff.file)
