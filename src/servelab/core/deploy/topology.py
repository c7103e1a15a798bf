"""The deployment's topology: in which order services start, stop and restart, and the exact
command line of the services servelab launches itself (``start = "sim"`` and ``start = "router"``:
sglang-router, smg or vllm-router, :mod:`servelab.core.deploy.routers`).

Pure functions of the spec (and of the python executable to use); no I/O.

Plans:

- ``up``: the requested services and everything they depend on, dependencies first;
- ``down``: the requested services and everything that depends on them, dependents first;
- ``up``: a service found already running behind one this ``up`` starts (a router whose decode
  was dead, a decode whose prefill was) is restarted after it (:func:`started_behind`), by the
  same rule as ``restart``'s;
- ``restart``: the requested services and, after each, everything that depends on it, in start
  order. Restarting decode also restarts the router; restarting prefill restarts decode and the
  router (the reference incident's prefill → decode → router co-restart): a router keeps its
  worker connections and a decode its bootstrap peers, so a dependent of a restarted service is
  restarted after it. A change to a file changes every service that reads it: the requested
  services come with every service that reads the same ``env_file`` or ``config_file`` (the
  file on the same host: :func:`file_sharers`), so two decode replicas sharing one env
  file are restarted together, never one left running the file's old value. The same file is
  the same identity when the caller read them (:data:`FileIdentities`: each file's device and
  inode on its host, read by :mod:`servelab.ops.fileids`: two paths linked to one file, by a
  symlink or a hard link, are one file); else the same path as written, normalised.
"""

from __future__ import annotations

import posixpath
from collections.abc import Hashable, Iterable, Mapping

from servelab.core.deploy.routers import SMG, RouterKind, RouterOptions
from servelab.core.deploy.spec import DeploymentSpec, ServiceSpec, start_order
from servelab.errors import SpecError

__all__ = [
    "LOOPBACK",
    "ROUTER_MODULE",
    "VLLM_STARTUP_CHECK_INTERVAL_S",
    "FileIdentities",
    "dependencies",
    "dependents",
    "down_plan",
    "engine_trace_args",
    "file_identity",
    "file_sharers",
    "restart_plan",
    "router_argv",
    "service_argv",
    "sim_argv",
    "started_behind",
    "stop_order",
    "up_plan",
]

#: Where the router's Prometheus endpoint binds (its default, 0.0.0.0, is never what we want).
LOOPBACK = "127.0.0.1"
#: The embedded default's router module (smg); each spec's is its own router's
#: (:attr:`~servelab.core.deploy.spec.DeploymentSpec.router`).
ROUTER_MODULE = SMG.module
#: vllm-router probes a worker that is not up yet every this many seconds at start-up (its default,
#: 30 s, would make every simulated start wait half a minute after the first failed probe).
VLLM_STARTUP_CHECK_INTERVAL_S = 1


def stop_order(spec: DeploymentSpec) -> list[str]:
    """Every service, dependents first (the reverse of the start order)."""
    return list(reversed(start_order(spec)))


def _closure(spec: DeploymentSpec, names: Iterable[str], edges: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        spec.service(name)  # unknown names raise SpecError
        seen.add(name)
        stack.extend(edges.get(name, []))
    return seen


def _reverse_edges(spec: DeploymentSpec) -> dict[str, list[str]]:
    edges: dict[str, list[str]] = {name: [] for name in spec.services}
    for name, svc in spec.services.items():
        for dep in svc.depends_on:
            edges[dep].append(name)
    return edges


def dependencies(spec: DeploymentSpec, names: Iterable[str]) -> set[str]:
    """``names`` and everything they depend on, transitively."""
    forward = {name: list(svc.depends_on) for name, svc in spec.services.items()}
    return _closure(spec, names, forward)


def dependents(spec: DeploymentSpec, names: Iterable[str]) -> set[str]:
    """``names`` and everything that depends on them, transitively."""
    return _closure(spec, names, _reverse_edges(spec))


#: Each file a service reads, by ``(host, path as the spec writes it, normalised)``: its
#: identity on that host (a :data:`~servelab.io.hosts.host.FileId`, device and inode), the same
#: for every path linked to it. A file missing here is known by its path alone.
FileIdentities = Mapping[tuple[str, str], Hashable]


def file_identity(
    svc: ServiceSpec, path: str, same: FileIdentities | None = None
) -> tuple[str, Hashable]:
    """``path`` (a file ``svc`` reads, as the spec writes it) as ``(host, identity)``: its
    identity in ``same`` when there, else its path normalised lexically (as the spec resolves
    it against its own directory)."""
    key = (svc.host, posixpath.normpath(path))
    return (svc.host, key if same is None else same.get(key, key))


def _files(svc: ServiceSpec, same: FileIdentities | None = None) -> set[tuple[str, Hashable]]:
    """The files the service reads (its env file and its config file), each as
    :func:`file_identity` gives it."""
    paths = (svc.env_file, svc.config_file)
    return {file_identity(svc, p, same) for p in paths if p}  # "": no file to share


def file_sharers(
    spec: DeploymentSpec, names: Iterable[str], same: FileIdentities | None = None
) -> set[str]:
    """``names`` and every service that reads one of their files (the same ``env_file`` or
    ``config_file`` on the same host: the same identity in ``same``, else the same path): a
    change to the file is a change to each of them."""
    wanted = set(names)
    files: set[tuple[str, Hashable]] = set().union(*(_files(spec.service(n), same) for n in wanted))
    return wanted | {name for name, svc in spec.services.items() if _files(svc, same) & files}


def _selected(spec: DeploymentSpec, services: Iterable[str] | None) -> list[str]:
    return list(spec.services) if services is None else list(services)


def up_plan(spec: DeploymentSpec, services: Iterable[str] | None = None) -> list[str]:
    """What ``up`` starts: the services and their dependencies, in start order."""
    wanted = dependencies(spec, _selected(spec, services))
    return [name for name in start_order(spec) if name in wanted]


def down_plan(spec: DeploymentSpec, services: Iterable[str] | None = None) -> list[str]:
    """What ``down`` stops: the services and their dependents, dependents first."""
    wanted = dependents(spec, _selected(spec, services))
    return [name for name in stop_order(spec) if name in wanted]


def started_behind(spec: DeploymentSpec, name: str, started: Iterable[str]) -> tuple[str, ...]:
    """The services of ``started`` (this ``up`` started them) that ``name`` depends on,
    transitively, in start order: when any, ``name``, found already running, is restarted after
    them, as ``restart`` restarts a dependent after the service it depends on (a router keeps its
    worker connections and its circuit breaker's state, a decode its bootstrap peers)."""
    behind = dependencies(spec, [name]) - {name}
    wanted = {other for other in started if other in behind}
    return tuple(other for other in start_order(spec) if other in wanted)


def restart_plan(
    spec: DeploymentSpec,
    services: Iterable[str] | None = None,
    same: FileIdentities | None = None,
) -> list[str]:
    """What ``restart`` restarts: the services, every service that reads one of their files
    (:func:`file_sharers`, with ``same``), and the dependents of all of them, in start order."""
    wanted = dependents(spec, file_sharers(spec, _selected(spec, services), same))
    return [name for name in start_order(spec) if name in wanted]


def _flag_given(args: list[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in args)


def _proxy_upstream(spec: DeploymentSpec, name: str) -> str:
    svc = spec.service(name)
    candidates = [dep for dep in svc.depends_on if spec.service(dep).role == "router"]
    upstream = candidates[0] if candidates else spec.router_name
    if upstream is None:
        raise SpecError(
            "a sim proxy needs a router to forward to (or --upstream in args)",
            path=f"services.{name}",
        )
    return spec.service(upstream).url


def sim_argv(spec: DeploymentSpec, name: str, python: str) -> list[str]:
    """``[python, -m, servelab, sim, ROLE, --host, H, --port, P, (--bootstrap-port B),
    (--engine vllm), (tracing), (SGLang: --enable-metrics), *args]``: a simulated engine
    started the way servelab reads it (metrics, and with ``[tracing]`` spans)."""
    svc = spec.service(name)
    if svc.role not in ("prefill", "decode", "proxy"):
        raise SpecError(
            f'start = "sim" cannot run role {svc.role!r}', path=f"services.{name}.start"
        )
    argv = [
        python,
        "-m",
        "servelab",
        "sim",
        svc.role,
        "--host",
        svc.hostname,
        "--port",
        str(svc.port),
    ]
    if svc.bootstrap_port is not None:
        argv += ["--bootstrap-port", str(svc.bootstrap_port)]
    if svc.role != "proxy" and spec.engine != "sglang":
        argv += ["--engine", spec.engine]
    if svc.role == "proxy" and not _flag_given(svc.args, "--upstream"):
        argv += ["--upstream", _proxy_upstream(spec, name)]
    if svc.role != "proxy" and not _flag_given(svc.args, "--otlp-traces-endpoint"):
        argv += engine_trace_args(spec)
    if svc.role != "proxy" and spec.engine == "sglang" and "--enable-metrics" not in svc.args:
        argv.append("--enable-metrics")  # servelab reads its /metrics (SGLang: 404 without)
    return [*argv, *svc.args]


def engine_trace_args(spec: DeploymentSpec) -> list[str]:
    """An engine's tracing switch for the spec's ``[tracing]`` endpoint (none without it), spelt
    as the real engines spell it, which the simulator accepts too: SGLang's ``--enable-trace
    --otlp-traces-endpoint HOST:PORT``, vLLM's ``--otlp-traces-endpoint HOST:PORT`` (both
    OTLP/gRPC). A shell-command engine gets them from its own command line."""
    if spec.tracing is None:
        return []
    endpoint = ["--otlp-traces-endpoint", spec.tracing.endpoint]
    return endpoint if spec.engine == "vllm" else ["--enable-trace", *endpoint]


def _workers(spec: DeploymentSpec) -> list[str]:
    args: list[str] = []
    for worker in spec.by_role("prefill"):
        svc = spec.service(worker)
        bootstrap = "none" if svc.bootstrap_port is None else str(svc.bootstrap_port)
        args += ["--prefill", svc.url, bootstrap]
    for worker in spec.by_role("decode"):
        args += ["--decode", spec.service(worker).url]
    return args


def _router_common(opts: RouterOptions) -> list[str]:
    """The options the three routers spell the same way (only those the spec sets, besides the
    Prometheus address and the start-up and health-check bounds, always given)."""
    argv = [
        "--prometheus-host",
        LOOPBACK,
        "--prometheus-port",
        str(opts.prometheus_port),
        "--worker-startup-timeout-secs",
        str(opts.worker_startup_timeout_s),
        "--health-check-interval-secs",
        str(opts.health_check_interval_s),
    ]
    optional = (
        ("--request-timeout-secs", opts.request_timeout_s),
        ("--health-failure-threshold", opts.health_failure_threshold),
        ("--health-success-threshold", opts.health_success_threshold),
    )
    for flag, value in optional:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def _policies(opts: RouterOptions) -> list[str]:
    """``--policy`` and, when the spec sets them, each role's own (``--prefill-policy``,
    ``--decode-policy``: all three routers read them in PD mode)."""
    argv = ["--policy", opts.policy]
    for flag, value in (("--prefill-policy", opts.prefill_policy),
                        ("--decode-policy", opts.decode_policy)):  # fmt: skip
        if value is not None:
            argv += [flag, value]
    return argv


def _vllm_workers(spec: DeploymentSpec) -> list[str]:
    """vllm-router's ``--prefill URL`` (no bootstrap port: NIXL's side channel is named by the
    prefill's answer) and ``--decode URL``."""
    args: list[str] = []
    for worker in spec.by_role("prefill"):
        args += ["--prefill", spec.service(worker).url]
    for worker in spec.by_role("decode"):
        args += ["--decode", spec.service(worker).url]
    return args


def _router_head(spec: DeploymentSpec, svc: ServiceSpec, python: str) -> list[str]:
    """The router's module, address, PD mode with its workers, and its policies."""
    router = spec.router
    head = [python, "-m", router.module, "--host", svc.hostname, "--port", str(svc.port)]
    opts = svc.router or RouterOptions()
    if router.kind is RouterKind.VLLM_ROUTER:
        head += ["--vllm-pd-disaggregation", *_vllm_workers(spec), "--kv-connector", "nixl"]
    else:  # sglang-router and smg: bootstrap ports after each prefill
        head += ["--pd-disaggregation", *_workers(spec)]
    head += _policies(opts)
    if router.startup_check_interval_s is not None:
        head += ["--worker-startup-check-interval", str(router.startup_check_interval_s)]
    return head


def router_argv(spec: DeploymentSpec, name: str, python: str) -> list[str]:
    """The deployment's real router (:attr:`DeploymentSpec.router`: sglang-router, smg or
    vllm-router) in PD mode, with every prefill and decode, always with ``--host``, ``--port``
    and a loopback Prometheus address (vllm-router's and smg's default port, 30000, is the
    reference prefill's; smg binds 0.0.0.0 by default)."""
    svc: ServiceSpec = spec.service(name)
    if svc.role != "router":
        raise SpecError('start = "router" needs role = "router"', path=f"services.{name}.start")
    opts = svc.router or RouterOptions()
    argv = [*_router_head(spec, svc, python), *_router_common(opts)]
    return [*argv, *opts.extra_args, *svc.args]


def service_argv(spec: DeploymentSpec, name: str, python: str) -> list[str] | None:
    """The argv servelab launches for ``sim``/``router`` services; None for a shell command."""
    start = spec.service(name).start
    if start == "sim":
        return sim_argv(spec, name, python)
    if start == "router":
        return router_argv(spec, name, python)
    return None
