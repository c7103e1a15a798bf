"""A recorded process that exits while ``up`` waits for it: it was stopping, not up (issue 38).

A command stopped by a signal (``ab``, ``tune``, ``case test``) names the router down with
``servelab up -f SPEC``; run at once, that ``up`` found the old router still alive, draining (smg
answers 503 ``{"reason":"draining"}`` for seconds after SIGTERM), waited for its readiness, saw it
exit and failed ("the process exited before it was ready"): a second ``up`` worked.
:func:`unless_stopping` gates a process servelab recorded and found alive; one that exits while
gated (a signal was stopping it) is said (:class:`~servelab.core.deploy.events.WasStopping`) and
is None, so ``up`` starts the service anew. The wait is the service's own readiness gate, bounded
by ``ready_timeout_s``; nothing is signalled here (the dead record's group is then stopped by the
caller, as any stale record's is: only servelab's own). A process still alive when the gate fails
(not ready in time, a start command that failed) fails the step as before.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from servelab.core.deploy.events import WasStopping
from servelab.core.deploy.steps import Ready
from servelab.errors import ServiceStartError
from servelab.io.hosts.processes import PidRecord, is_alive
from servelab.io.hosts.readiness import Readiness
from servelab.ops.context import Operation

__all__ = ["unless_stopping"]


async def unless_stopping(
    op: Operation, record: PidRecord, gate: Coroutine[Any, Any, tuple[Readiness, Ready]]
) -> Ready | None:
    """``gate`` (the readiness gate of ``record``'s live process) passed: its evidence. The
    process exited while gated: None (it was stopping; said). Alive at a failure: raised."""
    try:
        _state, gated = await gate
    except ServiceStartError:
        if await is_alive(op.host(record.service), record):
            raise
        op.say(WasStopping(record.service, record.pid))
        return None
    return gated
