"""What a command that makes arms live does when one fails: the deployment put back as found.

``ab``, ``tune``, ``case test``, ``case bisect`` and ``investigate`` make arms live
(:func:`servelab.ops.arm.make_live`: knobs set, a co-restart, a proof). When a block of them
fails (an arm's restart that did not come up, e.g. a port another process holds; an arm not
live; its measurement), :func:`as_found_on_failure` writes back each knob as the command found
it with the shared put-back (:func:`servelab.ops.deploy.putback.put_back`: it co-restarts when a
service is down or a knob runs another value) and lets the failure go on. When the deployment is
still down after that, the failure is a :class:`~servelab.ops.deploy.results.RestartLeftDown`
instead, as ``restart``'s own: it names the services left down and the command that brings them
back (``servelab up -f SPEC``); the CLI prints them (text and ``--json``'s ``down``,
``recovery``). A command is never left with the deployment down and unnamed. When nothing is
down but the put-back itself failed (a full ledger, a read-only env folder: a knob left at the
arm's value), the failure is a :class:`~servelab.ops.deploy.refused.PutBackAfterFailure`
naming both the failure and what is not back, with the ``servelab knob set`` that puts it back
(text and ``--json``'s ``put_back``); the command exits non-zero.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.core.deploy.topology import restart_plan
from servelab.core.restart.contract import RestartReport
from servelab.errors import DeployError, ServelabError
from servelab.ops.context import Operation
from servelab.ops.deploy.putback import put_back
from servelab.ops.deploy.refused import PutBackAfterFailure
from servelab.ops.deploy.results import RestartLeftDown
from servelab.ops.fileids import file_identities

__all__ = ["REASON", "as_found_on_failure"]

#: The reason recorded with each knob written back.
REASON = "put back as found: the command failed"


@contextlib.asynccontextmanager
async def as_found_on_failure(op: Operation, found: Sequence[KnobBack]) -> AsyncIterator[None]:
    """For the block: an error (an :class:`Exception`) puts ``found`` back (services brought up)
    and goes on; :class:`RestartLeftDown` instead when a service is still down after that. A
    stop signal during the put-back lets it finish, then stops the command as that signal says
    (:class:`~servelab.ops.deploy.putback.PutBackInterrupted`, carrying the failure); a second
    one stops the put-back itself, and what it left down is named."""
    try:
        yield
    except PutBackAfterFailure:  # put back already (servelab.ops.deploy.refused): it says what
        raise
    except RestartLeftDown as exc:  # the arm's restart itself left services down
        await _put_back(op, found, exc, exc.report.down)  # still down: raises
        raise DeployError(f"{exc.report.error}: arm not measured; put back as found") from exc
    except Exception as exc:
        await _put_back(op, found, exc, ())
        raise


async def _put_back(
    op: Operation, found: Sequence[KnobBack], exc: Exception, left_down: Sequence[str]
) -> None:
    """``found`` put back; :class:`RestartLeftDown` when something is still down,
    :class:`PutBackAfterFailure` (the failure and what is not back, with the commands that
    fix it) when nothing is down but the put-back failed: never the failure alone."""
    put = await put_back(op, found, left_down=left_down, reason=REASON, failure=str(exc))
    if put.down:
        raise RestartLeftDown(await _left_down(op, found, put, exc)) from exc
    if not put.ok:  # nothing down, yet a knob not back (a full ledger, a read-only env folder)
        raise PutBackAfterFailure(str(exc), put) from exc


async def _left_down(
    op: Operation, found: Sequence[KnobBack], put: PutBack, exc: Exception
) -> RestartReport:
    """The report a :class:`RestartLeftDown` carries: why, what is down, how to bring it up.
    Its plan is what ``restart`` restarts, the files compared by their identities on their host
    (links to one file are one file), by their paths when those cannot be read (a host gone:
    the failure is said, never replaced by that one)."""
    same = None
    with contextlib.suppress(ServelabError):
        same = await file_identities(op)
    services = list(dict.fromkeys(knob.service for knob in found))
    knobs = ", ".join(f"{k.service} {_setting(k)}" for k in found)
    how = "stopped by a signal" if put.interrupted else put.error or "services still down"
    why = f"{exc}; putting {knobs} back as found: {how}"
    return RestartReport(restart_plan(op.spec, services, same), [], error=why, down=list(put.down),
                         recovery=list(put.recovery))  # fmt: skip


def _setting(knob: KnobBack) -> str:
    return f"{knob.knob} unset" if knob.value is None else f"{knob.knob}={knob.value}"
