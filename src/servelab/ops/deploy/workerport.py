"""``up`` over a worker's port a router holds (issue 38, seventeenth pass H1): a spec whose
prefill or decode url is another deployment's router port never adopts that router as its
worker.

The real routers write their process title over their argv and environment (``sglang::router``,
``smg::router``, ``vllm::router``): their mark cannot be read, so
:func:`~servelab.ops.deploy.collision.refuse_foreign` cannot tell whose they are. Whoever's, a
router is no engine's worker: the process holding a worker's port that is a router (its title,
else its console script or ``-m`` module: :func:`~servelab.core.deploy.routers.router_process`)
fails the step, naming the pid and what it is. A process that is no router (a hand-started
engine) is adopted as before.

:func:`others_router`: for ``down``, the router on this spec's router port whose owner cannot be
told (its mark written over) and whose worker list lacks this spec's workers is another
deployment's: left alone and named, never suggested to be killed; and so is a router on a
worker's port, by the rule ``up`` refuses it by (a ``down`` after that refused ``up`` failed on
it, exit 1, with nothing of this deployment's running).
"""

from __future__ import annotations

from servelab.core.deploy.refusals import PortRefused, RouterOnWorkerPort
from servelab.core.deploy.routers import router_process
from servelab.errors import HostError
from servelab.io.hosts.host import Host
from servelab.ops.context import Operation
from servelab.ops.deploy.collision import routes_for_another
from servelab.ops.verify.verify import router_listing

__all__ = ["others_router", "refuse_router"]

#: Bytes of ``/proc/PID/comm`` (the kernel's 16) and ``/proc/PID/cmdline`` read at most: a longer
#: command line is not read (its process is then not told a router by it).
_COMM_LIMIT = 256
_CMDLINE_LIMIT = 1 << 20
#: The roles an engine's worker serves.
_WORKER_ROLES = ("prefill", "decode")


async def _router_word(host: Host, pid: int) -> str | None:
    """The word telling process ``pid`` is a router (None: not one, or it cannot be read): its
    name (``/proc/PID/comm``), else its command line's first word or ``-m`` module."""
    for name, limit in (("comm", _COMM_LIMIT), ("cmdline", _CMDLINE_LIMIT)):
        try:
            raw = await host.read_file(f"/proc/{pid}/{name}", limit=limit)
        except HostError:
            continue
        sep = b"\0" if name == "cmdline" else b"\n"
        argv = [word.decode("utf-8", "replace") for word in raw.split(sep)]
        word = router_process([w for w in argv if w] if name == "comm" else argv)
        if word is not None:
            return word
    return None


async def refuse_router(op: Operation, service: str, owner: int) -> None:
    """Raise :class:`~servelab.core.deploy.refusals.PortRefused` when ``owner``, the process
    holding the port of ``service``, a worker (``prefill``, ``decode``; any other role may be a
    router), is a router (:class:`~servelab.core.deploy.refusals.RouterOnWorkerPort`)."""
    svc = op.spec.service(service)
    if svc.role not in _WORKER_ROLES:
        return
    host = op.host(service)
    word = await _router_word(host, owner)
    if word is None:
        return
    raise PortRefused(RouterOnWorkerPort(service, svc.role, svc.port, host.name, owner, word))


async def others_router(op: Operation, service: str, owner: int) -> bool:
    """Whether ``owner``, the process serving ``service``'s port, whose owner cannot be told, is
    another deployment's router, by the rules ``up`` refuses by: ``service`` is a worker and
    ``owner`` a router (:func:`refuse_router`), or ``service`` is a router whose process lists
    its workers readably: another's, without all of this spec's (it routes for another
    deployment, :func:`~servelab.ops.deploy.collision.refuse_not_listing`)."""
    role = op.spec.service(service).role
    if role in _WORKER_ROLES:
        return await _router_word(op.host(service), owner) is not None
    if role != "router":
        return False
    return routes_for_another(await router_listing(op, service))
