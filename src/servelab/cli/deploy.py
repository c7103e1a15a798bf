"""``servelab up|down|status|restart``: bring the deployment up in order, stop it, show it,
co-restart it safely, or restart workers one at a time (``restart --rolling``).

Exit codes: 0 ok, 1 failed (a service did not start or become ready, verification failed), 2 bad
spec. ``up``/``down``/``restart`` are recorded in the ledger (``--ledger PATH``, else
``$SERVELAB_LEDGER``, else ``<state_dir>/ledger.db``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path
from typing import TypeVar

import click

from servelab.cli.boundary import (
    EXIT_FAILED,
    Interrupted,
    console,
    err_console,
    error,
    interruption,
    json_option,
    print_json,
    run,
    stopped_by,
)
from servelab.cli.common import SpecAndLedger, ledger_option, show_progress, spec_option
from servelab.cli.interrupted import (
    naming_restart_down,
    naming_stopped,
    naming_up_left,
    noting,
)
from servelab.cli.numbers import Finite
from servelab.cli.options import wait_option
from servelab.cli.stopsignals import hold_from_now, holding_once_done
from servelab.core.deploy.contract import ServiceStatus
from servelab.core.deploy.rolling import RollOptions
from servelab.core.options import MAX_SECONDS
from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.errors import NotALedger, StoreError
from servelab.io.ledger.ledger import Ledger
from servelab.io.lock import Hold
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Operation, Progress
from servelab.ops.deploy import deploy
from servelab.ops.deploy.results import RestartLeftDown
from servelab.ops.deploy.rolling import rolling_restart
from servelab.ops.deploy.rolling_results import RollingReport
from servelab.report.deploy import (
    deploy_json,
    render_deploy,
    render_restart,
    render_rolling,
    render_status,
    restart_json,
    rolling_json,
    status_json,
)

__all__ = [
    "down_command",
    "restart_command",
    "status_command",
    "up_command",
]

T = TypeVar("T")


def _operate(
    where: SpecAndLedger,
    wait: bool,
    action: Callable[[Operation], Awaitable[T]],
    say: Progress | None,
    kind: Hold = Hold.CHANGE,
    *,
    net: Callable[[Callable[[], LoadedSpec]], AbstractContextManager[None]] | None = None,
) -> T:
    """Run ``action`` in one operation (spec, ledger, progress, hosts) for the whole command,
    holding the deployment's lock as ``kind`` needs. ``net``: the stop net for a second signal
    that cut the cleanup short with nothing noted, given how to read the deployment, so what is
    left is read and named, never "interrupted" alone (``restart``:
    :func:`~servelab.cli.interrupted.naming_restart_down`, what is down; ``up``:
    :func:`~servelab.cli.interrupted.naming_up_left`, what still runs; ``down``:
    :func:`~servelab.cli.interrupted.naming_stopped`, what it stopped and what still runs)."""
    loaded = where.deployment()
    named = nullcontext() if net is None else net(lambda: loaded)
    with where.exclusive(wait=wait, kind=kind), named:
        return run(_with_ledger(where, loaded, action, say))


async def _with_ledger(
    where: SpecAndLedger,
    loaded: LoadedSpec,
    action: Callable[[Operation], Awaitable[T]],
    say: Progress | None,
) -> T:
    with where.ledger() as ledger:
        return await _in_operation(loaded, action, say, ledger)


async def _in_operation(
    loaded: LoadedSpec,
    action: Callable[[Operation], Awaitable[T]],
    say: Progress | None,
    ledger: Ledger | None = None,
) -> T:
    async with Operation(loaded, ledger=ledger, progress=say) as op:
        return await noting(action(op))  # a signal: what is down said, then exit 128+N


def _quiet(as_json: bool) -> Progress | None:
    return None if as_json and not sys.stderr.isatty() else show_progress


def _up_or_down(
    action: Callable[..., Awaitable[DeployReport]],
    services: tuple[str, ...],
    where: SpecAndLedger,
    as_json: bool,
    wait: bool,
) -> None:
    net = (
        naming_up_left if action is deploy.up else partial(naming_stopped, services=list(services))
    )
    report = _operate(where, wait, lambda op: action(op, list(services) or None), _quiet(as_json),
                      net=net)  # fmt: skip
    if report.error is not None:  # down, not recorded: it stopped all the same
        error(f"{report.action}: {report.error}")
    _show(deploy_json(report), render_deploy(report), as_json, report.ok)


@click.command("up")
@click.argument("services", nargs=-1)
@spec_option
@json_option
@ledger_option
@wait_option
def up_command(
    services: tuple[str, ...],
    spec_path: Path | None,
    as_json: bool,
    ledger_path: Path | None,
    wait: bool,
) -> None:
    """Start SERVICES (default: all) and their dependencies, in order, each gated on readiness."""
    _up_or_down(deploy.up, services, SpecAndLedger(spec_path, ledger_path), as_json, wait)


@click.command("down")
@click.argument("services", nargs=-1)
@spec_option
@json_option
@ledger_option
@wait_option
def down_command(
    services: tuple[str, ...],
    spec_path: Path | None,
    as_json: bool,
    ledger_path: Path | None,
    wait: bool,
) -> None:
    """Stop SERVICES (default: all) and their dependents, dependents first. Idempotent."""
    where = SpecAndLedger(spec_path, ledger_path)
    try:
        _up_or_down(deploy.down, services, where, as_json, wait)
    except StoreError as exc:
        if isinstance(exc, NotALedger):  # --ledger names another file: the user's mistake
            raise
        _down_unrecorded(services, where, as_json, wait, exc)


def _down_unrecorded(
    services: tuple[str, ...], where: SpecAndLedger, as_json: bool, wait: bool, exc: StoreError
) -> None:
    """``down`` with a ledger that cannot even be opened (its disk full, unreadable): the
    deployment is stopped all the same, and the report says it was not recorded (exit 1)."""
    loaded = where.deployment()
    with where.exclusive(wait=wait), naming_stopped(lambda: loaded, list(services)):
        report = run(_in_operation(loaded, lambda op: deploy.down(op, list(services) or None),
                                   _quiet(as_json)))  # fmt: skip
    report.error = f"not recorded in the ledger: {exc}"
    error(f"{report.action}: {report.error}")
    _show(deploy_json(report), render_deploy(report), as_json, False)


async def _status(spec_path: Path | None) -> list[ServiceStatus]:
    async with Operation(SpecAndLedger(spec_path).spec()) as op:
        return await deploy.status(op)


@click.command("status")
@spec_option
@json_option
def status_command(spec_path: Path | None, as_json: bool) -> None:
    """Each service: pid, url, readiness answer. Exit 1 when one is not ready."""
    statuses = run(_status(spec_path))
    ok = all(item.ready for item in statuses)
    _show(status_json(statuses), render_status(statuses), as_json, ok)


@click.command("restart")
@click.argument("services", nargs=-1)
@spec_option
@json_option
@ledger_option
@click.option("--no-verify", is_flag=True, help="Do not verify after the restart.")
@click.option(
    "--rollback",
    is_flag=True,
    help="If the restart or its verification fails, restore the env files from their latest "
    "backups and restart again.",
)
@click.option(
    "--rolling",
    is_flag=True,
    help="Restart the workers SERVICES name (roles prefill/decode or service names) one at a "
    "time: out of the router, drained, restarted alone, verified, back in; the router and the "
    "other workers keep serving.",
)
@click.option(
    "--drain-timeout",
    "drain_timeout_s",
    type=Finite(min=0, max=MAX_SECONDS),
    default=RollOptions.drain_timeout_s,
    show_default=True,
    help="With --rolling: seconds to wait for a worker's in-flight requests to finish.",
)
@wait_option
def restart_command(
    services: tuple[str, ...],
    spec_path: Path | None,
    as_json: bool,
    ledger_path: Path | None,
    no_verify: bool,
    rollback: bool,
    rolling: bool,
    drain_timeout_s: float,
    wait: bool,
) -> None:
    """Co-restart SERVICES and their dependents (e.g. decode restarts the router too), or, with
    --rolling, restart workers one at a time without taking the deployment down."""
    where = SpecAndLedger(spec_path, ledger_path)
    if rolling:
        _rolling(services, where, as_json, wait, (no_verify, rollback), drain_timeout_s)
        return
    done: list[RestartReport] = []
    first: int | None = None

    async def restarted(op: Operation) -> RestartReport:
        try:
            report = await deploy.restart(
                op, list(services) or None, verify_after=not no_verify, rollback=rollback
            )
        except RestartLeftDown:
            hold_from_now()  # its work ended: a signal now is only noted, the report said
            raise
        done.append(report)
        hold_from_now()
        return report

    with holding_once_done():
        try:
            report = _operate(where, wait, restarted, _quiet(as_json), net=naming_restart_down)
        except RestartLeftDown as exc:  # --json: the report (error, down, recovery); one line too
            if not as_json and not stopped_by():
                raise
            if as_json:
                print_json(restart_json(exc.report))
            error(exc)
            _exit_stopped()
            raise SystemExit(EXIT_FAILED) from None
        except Interrupted as exc:  # a signal as it ended (its cleanup cancelled): its report
            if not done:
                raise
            report, first = done[0], exc.signum
        try:
            _show(restart_json(report), render_restart(report), as_json, report.ok)
        finally:
            _exit_stopped(first)


def _exit_stopped(first: int | None = None) -> None:
    """A command whose work is done, its report said, exits by the first stop signal that came
    meanwhile (128 + its number; one line on stderr), if one did (``first``: the one that ended
    its run, when none was noted)."""
    signum = stopped_by() or first
    if signum is not None:
        err_console.print(interruption(signum), style="yellow")
        raise SystemExit(128 + signum)


def _rolling(
    services: tuple[str, ...],
    where: SpecAndLedger,
    as_json: bool,
    wait: bool,
    flags: tuple[bool, bool],
    drain_timeout_s: float,
) -> None:
    if any(flags):
        raise click.UsageError("--rolling verifies each worker itself and has no --rollback")
    if not services:
        raise click.UsageError(
            "--rolling needs ROLE or SERVICE names, e.g. `restart --rolling decode`"
        )
    options = RollOptions(drain_timeout_s=drain_timeout_s)

    async def roll(op: Operation) -> RollingReport:
        return await rolling_restart(op, list(services), options=options)

    report = _operate(where, wait, roll, _quiet(as_json), Hold.ROLL)  # runs under traffic
    _show(rolling_json(report), render_rolling(report), as_json, report.ok)


def _show(document: str, text: str, as_json: bool, ok: bool) -> None:
    if as_json:
        print_json(document)
    else:
        console.print(text, end="", markup=False, highlight=False)
    if not ok:
        raise SystemExit(EXIT_FAILED)
