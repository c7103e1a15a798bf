"""A knob change the deployment would not take, put back as found.

``ab``'s last step (``--keep``: the value left live) and ``case revert``/``restore`` set a value
and co-restart. When that fails once services are stopped (the engine exits on the value, a
readiness timeout), the deployment is not left down: :func:`put_back_on_failure` puts the knobs
back as the command found them and brings the services up again (the shared put-back,
:func:`servelab.ops.deploy.putback.put_back`, the one ``as_found`` runs on a stop signal), then
raises :class:`PutBackAfterFailure`, which carries what was done: the deployment as found, or the
services left down and the command that brings them back (``servelab up -f SPEC``).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import NoReturn

from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.errors import DeployError
from servelab.ops.context import Operation
from servelab.ops.deploy.putback import put_back

__all__ = ["PutBackAfterFailure", "put_back_on_failure"]


def _knobs(knobs: Sequence[KnobBack]) -> str:
    return ", ".join(f"{k.service} {k.knob}={'unset' if k.value is None else k.value}"
                     for k in knobs)  # fmt: skip


def _tail(put: PutBack) -> str:
    """What the put-back did, in one clause (an exception's message is one line)."""
    if put.ok:
        done = [f"wrote back {_knobs(put.written)}"] if put.written else []
        done += [f"co-restarted {', '.join(put.restarted)}"] if put.restarted else []
        return f"put back as found ({'; '.join(done) or 'nothing had changed'})"
    why = put.error or "stopped by a second signal"
    parts = [f"NOT put back as found ({why}): the deployment is NOT as this command found it"]
    for knob, fix in zip(put.not_written, put.fixes, strict=True):
        parts.append(f"not back in its file: {_knobs((knob,))}; put it back with: "
                     f"{shlex.join(fix)}")  # fmt: skip
    if put.still_live:
        parts += [f"{s.service} still runs {s.knob} at another value than its file" if s.read
                  else f"{s.service}'s {s.knob} not read back, not known to be as its file"
                  for s in put.still_live]  # fmt: skip
        parts += [f"down: {', '.join(put.down)}"] if put.down else []
        parts.append(f"apply the files with: {shlex.join(put.recovery)}")
    elif put.down:
        parts.append(f"down: {', '.join(put.down)}; bring them back with: "
                     f"{shlex.join(put.recovery)}")  # fmt: skip
    return "; ".join(parts)


class PutBackAfterFailure(DeployError):
    """A knob change failed once it had stopped services, and the deployment was put back:
    ``error`` is why it failed, ``put_back`` what putting it back did (``ok``: as found; else
    its ``down`` and ``recovery``). The message names both on one line."""

    def __init__(self, error: str, put: PutBack) -> None:
        super().__init__(f"{error}; {_tail(put)}")
        self.error = error
        self.put_back = put


async def put_back_on_failure(
    op: Operation, found: Sequence[KnobBack], error: Exception, reason: str
) -> NoReturn:
    """Put ``found`` back (each knob written back recorded with ``reason``) and the services up,
    then raise :class:`PutBackAfterFailure` from ``error``."""
    done = await put_back(op, found, reason=reason, failure=str(error))
    raise PutBackAfterFailure(str(error), done) from error
