"""What a command that changes knobs did when a stop signal ended it, in words (returns str):
the deployment put back as it found it, or, when that could not finish, the services left down,
those still running another value than their file, and the commands that fix them
(:class:`~servelab.core.deploy.putback.PutBack`). An interrupted ``up``/``restart`` is worded
by :func:`servelab.report.deploy.render_interruption`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from servelab.core.case.record import PutBackEvent
from servelab.core.deploy.putback import KnobBack, PutBack, StillLive
from servelab.core.redaction import mask

__all__ = ["after_failure", "describe_put_back", "render_left_down", "render_put_back"]


def _value(value: str | None) -> str:
    return "unset" if value is None else value


def _knobs(knobs: tuple[KnobBack, ...]) -> str:
    return ", ".join(f"{k.service} {k.knob}={_value(k.value)}" for k in knobs)


def _still(still: StillLive) -> str:
    """A service still running another value than its file's; or, its value unread (a router's
    command line written over, no report of it yet), only what was checked: never a value."""
    live, file = (_value(mask(still.knob, v)) for v in (still.live, still.file))
    if not still.read:
        return (f"{still.service}: {still.knob} not read back (its process hides it and has not "
                f"reported it yet), so not known to be as its file (file: {file})")  # fmt: skip
    return f"{still.service}: still running {still.knob}={live} (file: {file})"


def _left(put: PutBack) -> list[str]:
    """What runs with another value than its file, what is down, and the command that fixes
    both (one clause each)."""
    then = "then " if put.not_written else ""  # after the knobs' fixes
    recovery = shlex.join(put.recovery)
    if not put.still_live:
        if put.down:
            return [f"down: {', '.join(put.down)}; bring them back with: {recovery}"]
        if put.recovery:  # a knob written back is run once its service restarts
            return [f"then run the value found with: {recovery}"]
        return []
    lines = [*(_still(s) for s in put.still_live), *(f"{name}: down" for name in put.down)]
    return lines + ([f"{then}put back with: {recovery}"] if put.recovery else [])


def render_left_down(down: Sequence[str], recovery: Sequence[str]) -> str:
    """A command stopped where nothing put the deployment back: what is down, how to bring it
    back (read from the services after the stop)."""
    return (f"stopped before the deployment was put back; down: {', '.join(down)}; "
            f"bring them back with: {shlex.join(recovery)}\n")  # fmt: skip


def render_put_back(put: PutBack) -> str:
    """What the put-back did: the deployment as found, or what is down and how to fix it; first,
    the failure that started it when a stop signal came during it."""
    first = f"failed: {put.failure}\n" if put.failure else ""
    return first + _stopped(put)


def _stopped(put: PutBack) -> str:
    if put.ok:
        done = [f"wrote back {_knobs(put.written)}"] if put.written else []
        done += [f"co-restarted {', '.join(put.restarted)}"] if put.restarted else []
        did = "; ".join(done) or "nothing had changed"
        return f"stopped; the deployment is as this command found it ({did})\n"
    if put.interrupted:
        why = "a second signal stopped putting it back"
    else:
        why = f"putting it back failed: {put.error}"
    lines = [f"stopped; the deployment is NOT as this command found it ({why})"]
    if put.written:
        lines.append(f"  written back: {_knobs(put.written)}")
    for knob, fix in zip(put.not_written, put.fixes, strict=True):
        lines.append(
            f"  {knob.service} {knob.knob} is not back at {_value(knob.value)} in its file; "
            f"put it back with: {shlex.join(fix)}"
        )
    lines += [f"  {clause}" for clause in _left(put)]
    return "\n".join(lines) + "\n"


def _verified(put: PutBack) -> str:
    if put.verified:
        return "verified: every knob live at the value found, every service ready"
    return "NOT verified: a knob's live value or a service's readiness was not as found"


def after_failure(put: PutBack) -> str:
    """What putting the deployment back after a failed restart did, in one clause: as found (and
    whether that was verified live), or what is not back, what is down and the command that
    brings it back."""
    if put.ok:
        done = [f"wrote back {_knobs(put.written)}"] if put.written else []
        done += [f"co-restarted {', '.join(put.restarted)}"] if put.restarted else []
        return f"put back as found ({'; '.join(done) or 'nothing had changed'}); {_verified(put)}"
    parts = [f"NOT put back as found ({put.error or 'stopped by a second signal'})"]
    for knob, fix in zip(put.not_written, put.fixes, strict=True):
        parts.append(f"{knob.service} {knob.knob} is not back at {_value(knob.value)} in its "
                     f"file; put it back with: {shlex.join(fix)}")  # fmt: skip
    return "; ".join([*parts, *_left(put)])


def describe_put_back(event: PutBackEvent) -> str:
    """A case's put-back event (a revert's or restore's restart failed), one timeline line."""
    done = [f"wrote back {_knobs(event.written)}"] if event.written else []
    done += [f"co-restarted {', '.join(event.restarted)}"] if event.restarted else []
    did = "; ".join(done) or "nothing had changed"
    if not event.ok:
        why = event.error or "stopped by a second signal"
        down = f"; down: {', '.join(event.down)}" if event.down else ""
        return f"{event.after} failed; NOT put back as found ({why}; {did}){down}"
    check = "verified live" if event.live_as_found else "NOT verified live"
    return f"{event.after} failed; put back as found ({did}): {check}"
