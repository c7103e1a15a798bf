"""What a command stopped by a signal left, said: :func:`noting` wraps a command's coroutine and
notes (:func:`servelab.cli.boundary.note_interruption`) what its interruption carries, for the
failure boundary to print on stderr before ``interrupted`` and to add to the ``--json`` failure
document (``down``, ``recovery``, and ``put_back`` or ``report``; exit 128 + the signal):

- :class:`~servelab.ops.deploy.putback.PutBackInterrupted` (``case test``/``revert``/``restore``/
  ``bisect``, ``ab``, ``tune``): the deployment put back as found, or the services left down and
  the command that brings them back;
- :class:`~servelab.ops.deploy.results.DeployInterrupted` (``up``, ``restart``, a rolling
  restart): what it stopped, or left down and the command that brings it back.

A failure that left services down (:class:`~servelab.ops.deploy.results.RestartLeftDown`: an
arm's restart of ``ab``, ``tune``, ``case test``/``bisect`` that did not come up, nor the
put-back after it) is noted the same way, without a signal: its one line names them already,
and the ``--json`` failure document gets ``down``, ``recovery`` and the ``report``; so is a
value put back after it failed (:class:`~servelab.ops.deploy.refused.PutBackAfterFailure`:
``ab``'s last step), with its ``put_back``.

:func:`naming_down` is the last word of a command that co-restarts and puts back (``investigate``,
``ab``, ``tune``, ``case test``, ``case bisect``): stopped by a signal where nothing noted what it
left (a second Ctrl-C before a put-back took the signals over: ``KeyboardInterrupt`` at once, the
router stopped; or a Ctrl-C before anything changed, a service gone meanwhile), the services are
read (:func:`servelab.ops.deploy.upcheck.left_down`) and those down are noted with the command
that brings them back; never a deployment left down and unnamed. A second signal that comes
after a knob was changed and before its put-back took the signals over is given to the put-back
(:func:`servelab.ops.deploy.putback.second_signal`: it starts stopped, reads what is left and
says it: a knob file left at an arm's value, with the ``knob set`` that writes it back and the
restart that runs it). A third stops at once, the put-back never run: what it would have put
back is read instead (:func:`servelab.ops.deploy.putback.left_as_is`) and noted as an
interrupted put-back is.

:func:`naming_restart_down` is ``restart``'s: a second signal that cut its cleanup short (two
signals ~50 ms apart) left nothing noted; what is down is read the same way and said as an
interrupted restart says it (``restart interrupted; down: ...; bring them back with: ...``).
:func:`naming_up_left` is ``up``'s (what still answers), :func:`naming_stopped` ``down``'s (what
it stopped, what still runs, and the ``down`` that finishes it).
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from servelab.cli.boundary import (
    Left,
    interruption_noted,
    note_interruption,
    run,
)
from servelab.cli.stopsignals import second_signal_to
from servelab.core.deploy.topology import down_plan
from servelab.core.ledger.codec import encode
from servelab.core.restart.contract import DownLeft, RestartReport
from servelab.errors import ServelabError
from servelab.io.specfile import LoadedSpec
from servelab.ops.deploy.putback import (
    PutBackInterrupted,
    Unended,
    left_as_is,
    second_signal,
    watching_put_backs,
)
from servelab.ops.deploy.refused import PutBackAfterFailure
from servelab.ops.deploy.results import DeployInterrupted, RestartLeftDown
from servelab.ops.deploy.upcheck import left_down, running_processes, running_services
from servelab.report.deploy import render_down_left, render_interruption, render_up_left
from servelab.report.putback import render_left_down, render_put_back

__all__ = ["naming_down", "naming_restart_down", "naming_stopped", "naming_up_left", "noting"]

T = TypeVar("T")


def _line(argv: tuple[str, ...] | list[str]) -> str | None:
    return shlex.join(argv) if argv else None


async def noting(work: Awaitable[T]) -> T:
    """Await ``work``; stopped by a signal (or failed leaving services down), note what it
    left, then let the stop go on."""
    try:
        return await work
    except RestartLeftDown as exc:  # its line names what is down: no text of its own
        down, recovery = tuple(exc.report.down), _line(exc.report.recovery)
        note_interruption(Left("", down, recovery, "report", encode(exc.report)))
        raise
    except PutBackAfterFailure as exc:  # its line says what putting back did
        put = exc.put_back
        note_interruption(Left("", put.down, _line(put.recovery), "put_back", encode(put)))
        raise
    except PutBackInterrupted as exc:
        put = exc.put_back
        text = render_put_back(put)
        note_interruption(Left(text, put.down, _line(put.recovery), "put_back", encode(put)))
        raise
    except DeployInterrupted as exc:
        report = exc.report
        text = render_interruption(report)
        if isinstance(report, RestartReport):
            left = Left(text, tuple(report.down), _line(report.recovery), "report", encode(report))
        else:  # up, a rolling restart: the report says what it stopped, or left out
            left = Left(text, None, None, "report", encode(report))
        note_interruption(left)
        raise


@contextlib.contextmanager
def _net(left: Callable[[], Left | None]) -> Iterator[None]:
    """For a command's block: stopped by a signal with nothing noted, what ``left()`` reads is
    noted (None: nothing to say; a third signal, or a spec that cannot be read: nothing more is
    said)."""
    try:
        yield
    except KeyboardInterrupt:
        if not interruption_noted():
            with contextlib.suppress(KeyboardInterrupt, ServelabError, OSError):
                if (found := left()) is not None:
                    note_interruption(found)
        raise


@contextlib.contextmanager
def naming_down(deployment: Callable[[], LoadedSpec]) -> Iterator[None]:
    """For a command's block: stopped by a signal with nothing noted, what a put-back it left
    open never put back, else the services of ``deployment()`` that are down, are noted with the
    commands that fix them."""
    with (
        watching_put_backs() as unended,
        second_signal_to(lambda: second_signal(unended)),
        _net(lambda: _put_back_left(deployment, list(unended))),
    ):
        yield


def _put_back_left(deployment: Callable[[], LoadedSpec], unended: list[Unended]) -> Left | None:
    """What the put-backs ``unended`` never ran left, else what is down (None: as found)."""
    put = run(left_as_is(unended))
    if put is not None:
        if put.ok:
            return None
        return Left(render_put_back(put), put.down, _line(put.recovery), "put_back", encode(put))
    report = run(left_down(deployment()))
    if report is None:
        return None
    text = render_left_down(report.down, report.recovery)
    return Left(text, tuple(report.down), _line(report.recovery), "report", encode(report))


@contextlib.contextmanager
def naming_restart_down(deployment: Callable[[], LoadedSpec]) -> Iterator[None]:
    """For ``restart``'s block: stopped by a signal with nothing noted (a second signal cut its
    cleanup short), the services of ``deployment()`` that are down are noted as an interrupted
    restart's report."""
    with _net(lambda: _restart_left(deployment)):
        yield


def _restart_left(deployment: Callable[[], LoadedSpec]) -> Left | None:
    report = run(left_down(deployment()))
    if report is None:
        return None
    text, recovery = render_interruption(report), _line(report.recovery)
    return Left(text, tuple(report.down), recovery, "report", encode(report))


@contextlib.contextmanager
def naming_up_left(deployment: Callable[[], LoadedSpec]) -> Iterator[None]:
    """For ``up``'s block: stopped by a signal with nothing noted (a second signal cut its
    cleanup short: what it started may still run), the services of ``deployment()`` that answer
    are named with the commands that stop them or bring the rest up."""
    with _net(lambda: _up_left(deployment)):
        yield


def _up_left(deployment: Callable[[], LoadedSpec]) -> Left | None:
    loaded = deployment()
    running = run(running_services(loaded))
    if not running:
        return None
    return Left(render_up_left(running, loaded.spec_args), None, None, "running", list(running))


@contextlib.contextmanager
def naming_stopped(deployment: Callable[[], LoadedSpec], services: list[str]) -> Iterator[None]:
    """For ``down``'s block (stopping ``services``, all when empty): stopped by a signal with
    nothing noted, what it stopped and what still runs (read from the pid records and processes)
    are named, with the command that finishes it (``servelab down -f SPEC [SERVICES]`` again)."""
    with _net(lambda: _down_left(deployment, services)):
        yield


def _down_left(deployment: Callable[[], LoadedSpec], services: list[str]) -> Left:
    loaded = deployment()
    plan = down_plan(loaded.spec, services or None)
    running = run(running_processes(loaded, plan))
    stopped = [name for name in plan if name not in running]
    left = DownLeft(stopped, list(running), ["servelab", "down", *loaded.spec_args, *services])
    return Left(render_down_left(left), None, None, "left", encode(left))
