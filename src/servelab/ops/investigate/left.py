"""What an interrupted ``investigate`` left down when nothing put the deployment back.

Each experiment puts the deployment back as found when a stop signal cancels it
(:func:`servelab.ops.deploy.putback.as_found`). A signal can also end the command where no
put-back runs: a second Ctrl-C before the put-back took the signals over raises
``KeyboardInterrupt`` at once, wherever the command was (the router stopped, the decode starting).
:func:`left_down` reads then, from the services themselves (their readiness), which are down and
names the command that brings them back (``servelab up -f SPEC``), as an interrupted ``restart``
does; the CLI says it (text and ``--json``'s ``down``, ``recovery``).
"""

from __future__ import annotations

import contextlib

from servelab.core.deploy.spec import start_order
from servelab.core.restart.contract import RestartReport
from servelab.errors import ServelabError
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Operation
from servelab.ops.deploy.services import readiness

__all__ = ["READY_TIMEOUT_S", "left_down"]

#: Each service's readiness is waited for this long at most (the command is stopping).
READY_TIMEOUT_S = 3.0


async def left_down(loaded: LoadedSpec) -> RestartReport | None:
    """The deployment's services not ready, in start order, and the command that brings them
    back, as an interrupted restart's report; None when every service is ready."""
    down: list[str] = []
    async with Operation(loaded) as op:
        for name in start_order(op.spec):
            with contextlib.suppress(ServelabError):
                if (await readiness(op, name, timeout=READY_TIMEOUT_S)).ok:
                    continue
            down.append(name)
    if not down:
        return None
    recovery = ["servelab", "up", *loaded.spec_args]
    return RestartReport(down, [], interrupted=True, error="interrupted", down=down,
                         recovery=recovery)  # fmt: skip
