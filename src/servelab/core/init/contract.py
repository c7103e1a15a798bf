"""What ``servelab init`` found about a running deployment: its router, its workers, the hosts
they run on, and what it could not find (codes; the words are in :mod:`servelab.report.init`).

ops (:mod:`servelab.ops.init`) builds an :class:`InitResult`; report turns it into a spec's TOML
and a note of the gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from servelab.core.deploy.routers import RouterKind
from servelab.core.engines import EngineName

__all__ = [
    "ANSWERS_BYTES",
    "ANSWER_BYTES",
    "FoundHost",
    "FoundService",
    "Gap",
    "GapCode",
    "InitResult",
    "StartFact",
]

#: The most bytes ``init`` reads of one answer (``/workers``, ``/server_info``, ``/version``,
#: ``/v1/models``): a real ``/server_info`` is under 64 KiB.
ANSWER_BYTES = 1 << 20
#: The most bytes of all the answers of one ``init`` together (256 workers' real reports are a
#: few MiB).
ANSWERS_BYTES = 32 << 20


class GapCode(StrEnum):
    """Something ``init`` could not find, or only guessed (the user edits the spec there)."""

    #: The router's worker list had no mark of its kind; the kind is a guess.
    ROUTER_KIND_GUESSED = "router_kind_guessed"
    #: ``GET /v1/models`` through the router named no model.
    NO_MODEL = "no_model"
    #: The worker answered no ``/server_info`` (vLLM: only under ``VLLM_SERVER_DEV_MODE=1``).
    NO_SERVER_INFO = "no_server_info"
    #: The worker's engine version could not be read.
    NO_ENGINE_VERSION = "no_engine_version"
    #: The service's host is not reachable (not loopback and no ``--ssh`` for it).
    HOST_NOT_REACHED = "host_not_reached"
    #: No process listens on the service's port on its host (or it could not be read).
    NO_PROCESS = "no_process"
    #: The process rewrote its argv (the routers do): its command line cannot be read.
    ARGV_REWRITTEN = "argv_rewritten"
    #: A process not under systemd: its environment is not copied (it may hold secrets).
    ENV_NOT_COPIED = "env_not_copied"
    #: The start command is servelab's own launch of the router kind (not the one running).
    ROUTER_START_GUESSED = "router_start_guessed"
    #: The router's Prometheus port could not be told; the spec's default is written.
    NO_ROUTER_METRICS_PORT = "no_router_metrics_port"
    #: The router lists no bootstrap port for the prefill (vllm-router: the NIXL side channel is
    #: the engine's, not the router's).
    NO_BOOTSTRAP_PORT = "no_bootstrap_port"
    #: The systemd unit's ExecStart could not be read.
    NO_EXEC_START = "no_exec_start"
    #: A value after a secret-looking flag in its command line was masked in the spec.
    SECRET_MASKED = "secret_masked"
    #: A listed worker whose URL or bootstrap port is not one: left out of the spec.
    BAD_WORKER = "bad_worker"
    #: An answer over :data:`ANSWER_BYTES` (its path is the detail): not read.
    ANSWER_TOO_LARGE = "answer_too_large"


@dataclass(frozen=True)
class Gap:
    """One thing not found for ``service`` (None: the deployment), with what was seen."""

    service: str | None
    code: GapCode
    detail: str = ""


@dataclass(frozen=True)
class FoundHost:
    """A host of the deployment: ``ssh`` None for this machine."""

    name: str
    ssh: str | None = None
    port: int = 22
    identity_file: str | None = None


@dataclass(frozen=True)
class StartFact:
    """How the service's process starts, as far as it could be read: a systemd unit (its
    ``ExecStart=``, its ``EnvironmentFile=`` and the variable of it the command line expands),
    else the process's own command line."""

    argv: tuple[str, ...] = ()
    unit: str | None = None
    exec_start: str | None = None
    env_file: str | None = None
    args_env: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class FoundService:
    """One service of the deployment, as found."""

    name: str
    role: str
    url: str
    host: str = "local"
    bootstrap_port: int | None = None
    start: StartFact = StartFact()
    #: What the engine reports: its model path and version (workers only; None: not read).
    model_path: str | None = None
    version: str | None = None
    depends_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class InitResult:
    """A running deployment as ``init`` read it (the spec is written from this)."""

    name: str
    engine: EngineName
    router_kind: RouterKind
    model: str | None
    hosts: tuple[FoundHost, ...]
    services: tuple[FoundService, ...]
    gaps: tuple[Gap, ...]
    #: The router's Prometheus port, when one was told.
    prometheus_port: int | None = None
