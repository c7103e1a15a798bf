"""The deployment spec: the model of a PD deployment and its validation (the embedded default is
:mod:`servelab.core.deploy.defaultspec`).

A spec is TOML. It names hosts (local, or SSH) and services (prefill, decode, router, proxy or a
generic process): where each runs, how it starts, its env file, the knobs it declares, what it
depends on (start order) and how its readiness is probed. Parsing is pure: :func:`parse_spec`
takes the text and a source name for messages; reading files lives in :mod:`servelab.io.specfile`.

Every error is a :class:`~servelab.errors.SpecError` naming the source file and the field path,
e.g. ``servelab.toml: services.decode.url: not a URL``.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from servelab.core.deploy.names import SAFE_NAME_RULE, unsafe_name
from servelab.core.deploy.routers import Router, RouterOptions, router_description, router_problem
from servelab.core.engines import ENGINES, EngineName
from servelab.core.knob import KnobKind, parse_knob
from servelab.core.urls import parse_http_url
from servelab.errors import SpecError, UrlError

__all__ = [
    "DEFAULT_OTLP_ENDPOINT",
    "MAX_TIMEOUT_S",
    "DeploymentSpec",
    "HostSpec",
    "PrometheusSpec",
    "ServiceSpec",
    "TracingSpec",
    "parse_spec",
    "spec_hash",
    "start_order",
]

Role = Literal["prefill", "decode", "router", "proxy", "generic"]


#: The longest timeout (or wait) a spec may give: a day. Past it, or infinite, a wait would never
#: end in practice (``up`` stuck on a service that never gets ready, a rollback that never kills).
MAX_TIMEOUT_S = 86400.0


class _Strict(BaseModel):
    # allow_inf_nan=False: every float of the spec is finite (inf/nan refused, naming the field).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class HostSpec(_Strict):
    """Where services run: this machine, or a machine reached over SSH."""

    ssh: str | None = Field(default=None, description="user@host; absent for the local host")
    port: int = Field(default=22, ge=1, le=65535)
    identity_file: str | None = None
    known_hosts: str | None = Field(default=None, description="known_hosts file; none = no check")
    connect_timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S)

    @property
    def is_local(self) -> bool:
        return self.ssh is None

    @field_validator("ssh")
    @classmethod
    def _user_at_host(cls, value: str | None) -> str | None:
        if value is not None and (value.count("@") != 1 or not all(value.split("@"))):
            raise ValueError("must be user@host")
        return value


def _server_url(value: str, must: str, port_required: bool) -> str:
    """A spec's server URL (:func:`~servelab.core.urls.parse_http_url`), without its trailing
    ``/``; else a ValueError, ``must`` with why in its ``{}`` (never quoting the URL: its
    password), which the spec's error names with the file and the field."""
    try:
        parse_http_url(value, port_required=port_required)
    except UrlError as exc:
        raise ValueError(must.format(exc.why)) from None
    return value.rstrip("/")


class PrometheusSpec(_Strict):
    """A Prometheus server that already scrapes the deployment: servelab asks it (range queries
    over each run's window) instead of scraping the endpoints itself."""

    url: str
    #: service name -> the ``instance`` label Prometheus gives that service's metrics target;
    #: by default the ``host:port`` of the service's metrics URL.
    instances: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=10.0, gt=0, le=MAX_TIMEOUT_S)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _server_url(value, "must be an http URL ({}), e.g. http://127.0.0.1:9090", False)


#: Where spans go when ``[tracing]`` gives no endpoint: OTLP/gRPC's usual port, on loopback.
DEFAULT_OTLP_ENDPOINT = "127.0.0.1:4317"


class TracingSpec(_Strict):
    """Per-request tracing: the router and the engines export OpenTelemetry spans (OTLP/gRPC) to
    ``endpoint``, where servelab's receiver listens for the duration of each bench run."""

    endpoint: str = DEFAULT_OTLP_ENDPOINT
    #: How long a run waits, after its last request, for the spans still in the exporters' batches.
    wait_s: float = Field(default=10.0, ge=0, le=MAX_TIMEOUT_S)

    @field_validator("endpoint")
    @classmethod
    def _host_port(cls, value: str) -> str:
        must = "must be HOST:PORT (OTLP/gRPC, no scheme{}), e.g. 127.0.0.1:4317"
        if any(c in value for c in "/@?#"):
            raise ValueError(must.format(""))
        _server_url(f"http://{value}", must.format(": {}"), True)  # [::1]:4317, a port 1-65535
        return value

    @property
    def host(self) -> str:
        return self.endpoint.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.endpoint.rpartition(":")[2])


class ServiceSpec(_Strict):
    """One process of the deployment."""

    role: Role
    url: str
    host: str = "local"
    start: str = Field(
        description='"sim" (built-in simulated worker or proxy), "router" (the real router of '
        "the deployment's engine: sglang-router or vllm-router), or a shell command line"
    )
    stop: str | None = Field(default=None, description="shell command to stop (default: signals)")
    unit: str | None = Field(default=None, description="systemd unit; PID from MainPID")
    args: list[str] = Field(default_factory=list, description="extra arguments for sim/router")
    env_file: str | None = None
    #: The env-file variable that holds the server's arguments, which its start command expands
    #: (systemd ``EnvironmentFile=`` + ``ExecStart=... $SGLANG_ARGS``; servelab appends it to
    #: the command line of the ``sim``/``router`` services it launches the same way).
    args_env: str | None = None
    #: The YAML file the engine reads with ``--config`` (relative to the spec's directory).
    config_file: str | None = None
    #: ``restart`` may run ``systemctl daemon-reload`` when the unit changed on disk.
    manage_unit: bool = False
    knobs: dict[str, str | None] = Field(default_factory=dict)
    #: Environment variables this service's engine build reads beyond its release's own list (a
    #: custom build's kernel knob): such a knob is read, not flagged (docs/spec.md).
    reads_env: list[str] = Field(default_factory=list)
    depends_on: list[str] = Field(default_factory=list)
    ready_path: str | None = None
    ready_timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    start_timeout_s: float = Field(
        default=60.0, gt=0, le=MAX_TIMEOUT_S, description="timeout of the start command"
    )
    stop_grace_s: float = Field(default=10.0, ge=0, le=MAX_TIMEOUT_S)
    bootstrap_port: int | None = Field(default=None, ge=1, le=65535)
    router: RouterOptions | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _server_url(value, "must be an http URL ({}), e.g. http://127.0.0.1:30000", True)

    @field_validator("start")
    @classmethod
    def _start(cls, value: str) -> str:
        if not value.strip():
            raise ValueError('must be "sim", "router" or a shell command line, not empty')
        return value

    @field_validator("knobs", mode="before")
    @classmethod
    def _knob_list(cls, value: Any) -> Any:
        # `knobs = ["NAME"]` declares a knob without pinning its value.
        if isinstance(value, list):
            return dict.fromkeys(value)
        return value

    @field_validator("knobs")
    @classmethod
    def _knob_names(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for name in value:
            parse_knob(name)  # a KnobError (a ValueError) names the forms a knob takes
        return value

    @field_validator("reads_env")
    @classmethod
    def _variables(cls, value: list[str]) -> list[str]:
        for name in value:
            if parse_knob(name).kind is not KnobKind.ENV:
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @field_validator("args_env")
    @classmethod
    def _variable(cls, value: str | None) -> str | None:
        if value is not None and parse_knob(value).kind is not KnobKind.ENV:
            raise ValueError("must be an environment variable name, e.g. SGLANG_ARGS")
        return value

    @property
    def hostname(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None  # checked by the validator
        return port


class DeploymentSpec(_Strict):
    """A whole deployment: hosts and services (in the order the file gives them)."""

    name: str = "servelab"
    #: The serving engine of every worker (deployment-wide): which router ``start = "router"``
    #: runs, which simulator ``start = "sim"`` runs, and which names its metrics have.
    engine: EngineName = "sglang"
    state_dir: str = ".servelab"
    hosts: dict[str, HostSpec] = Field(default_factory=lambda: {"local": HostSpec()})
    services: dict[str, ServiceSpec]
    prometheus: PrometheusSpec | None = None
    #: Per-request tracing (``[tracing]``); None: off.
    tracing: TracingSpec | None = None
    #: The file the spec was read from (``parse_spec``'s ``source``): every error names it.
    _source: str = PrivateAttr(default="<spec>")

    @property
    def source(self) -> str:
        return self._source

    @field_validator("name")
    @classmethod
    def _name_is_one_segment(cls, value: str) -> str:
        if unsafe_name([value]) is not None:
            raise ValueError(SAFE_NAME_RULE)
        return value

    @field_validator("hosts")
    @classmethod
    def _local_always_exists(cls, value: dict[str, HostSpec]) -> dict[str, HostSpec]:
        if "local" in value:
            if not value["local"].is_local:
                raise ValueError('the host name "local" is reserved for this machine')
            return value
        return {"local": HostSpec(), **value}

    def service(self, name: str) -> ServiceSpec:
        try:
            return self.services[name]
        except KeyError:
            known = ", ".join(self.services)
            raise SpecError(
                f"unknown service {name!r} (known: {known})", source=self._source, path="services"
            ) from None

    def by_role(self, role: Role) -> list[str]:
        return [name for name, svc in self.services.items() if svc.role == role]

    @property
    def entry_point(self) -> str:
        """The service clients talk to: the proxy when there is one, else the router."""
        for role in ("proxy", "router"):
            names = self.by_role(role)
            if names:
                return names[0]
        raise SpecError(
            "the deployment has no router or proxy", source=self._source, path="services"
        )

    @property
    def router_name(self) -> str | None:
        names = self.by_role("router")
        return names[0] if names else None

    def readiness_path(self, name: str) -> str:
        """The path service ``name`` is probed on for readiness: its ``ready_path``, else its
        engine's (:class:`~servelab.core.engines.Engine`): a router's ``/readiness`` (its
        ``/health`` is always 200 on sglang-router and proves nothing; vllm-router's ``/readiness``
        is 200 while each role has a healthy worker), a worker's ``/health``."""
        svc = self.service(name)
        if svc.ready_path is not None:
            return svc.ready_path
        facts = ENGINES[self.engine]
        return facts.router_ready_path if svc.role == "router" else facts.worker_ready_path

    @property
    def router(self) -> Router:
        """The router it runs: its router service's ``router.kind``, else the engine's own."""
        name = self.router_name
        opts = None if name is None else self.services[name].router
        return router_description(self.engine, None if opts is None else opts.kind)


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _check_semantics(spec: DeploymentSpec, source: str) -> None:
    for kind, names in (("services", spec.services), ("hosts", spec.hosts)):
        if (bad := unsafe_name(names)) is not None:
            raise SpecError(f"the name {bad!r} {SAFE_NAME_RULE}", source=source, path=kind)
    for name, svc in spec.services.items():
        where = f"services.{name}"
        if svc.host not in spec.hosts:
            raise SpecError(f"unknown host {svc.host!r}", source=source, path=f"{where}.host")
        for dep in svc.depends_on:
            if dep not in spec.services:
                raise SpecError(
                    f"unknown service {dep!r}", source=source, path=f"{where}.depends_on"
                )
            if dep == name:
                raise SpecError(
                    "a service cannot depend on itself", source=source, path=f"{where}.depends_on"
                )
        if svc.role == "prefill" and svc.start == "sim" and svc.bootstrap_port is None:
            raise SpecError("a prefill needs a bootstrap_port", source=source, path=where)
        if svc.args_env is not None and svc.env_file is None:
            raise SpecError(
                "args_env names a variable of the env file: give env_file too",
                source=source,
                path=f"{where}.args_env",
            )
        if svc.start == "router" and svc.role != "router":
            raise SpecError(
                'start = "router" needs role = "router"', source=source, path=f"{where}.start"
            )
        opts = svc.router
        if opts and (problem := router_problem(spec.engine, opts.kind, opts.version)):
            raise SpecError(problem[1], source=source, path=f"{where}.router.{problem[0]}")
    for name in spec.prometheus.instances if spec.prometheus else {}:
        if name not in spec.services:
            raise SpecError(
                f"unknown service {name!r}", source=source, path=f"prometheus.instances.{name}"
            )
    _check_ports(spec, source)
    start_order(spec, source=source)


def _check_ports(spec: DeploymentSpec, source: str) -> None:
    seen: dict[tuple[str, int], str] = {}
    for name, svc in spec.services.items():
        ports = [("url", svc.port)]
        if svc.bootstrap_port is not None:
            ports.append(("bootstrap_port", svc.bootstrap_port))
        if svc.start == "router":
            ports.append(
                ("router.prometheus_port", (svc.router or RouterOptions()).prometheus_port)
            )
        for field, port in ports:
            key = (svc.host, port)
            if key in seen:
                raise SpecError(
                    f"port {port} on host {svc.host!r} is already used by {seen[key]}",
                    source=source,
                    path=f"services.{name}.{field}",
                )
            seen[key] = f"services.{name}.{field}"


def start_order(spec: DeploymentSpec, *, source: str = "<spec>") -> list[str]:
    """Services in dependency order (dependencies first; file order among equals).

    Raises :class:`SpecError` naming the cycle when there is one.
    """
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "active":
            cycle = " -> ".join([*trail[trail.index(name) :], name])
            raise SpecError(
                f"dependency cycle: {cycle}", source=source, path=f"services.{name}.depends_on"
            )
        state[name] = "active"
        for dep in spec.services[name].depends_on:
            visit(dep, [*trail, name])
        state[name] = "done"
        order.append(name)

    for name in spec.services:
        visit(name, [])
    return order


_TOO_DEEP = "not a deployment spec: its values are nested too deeply"


def parse_spec(text: str, *, source: str = "<spec>") -> DeploymentSpec:
    """Parse and validate a TOML spec. Every error names ``source`` and the field path."""
    try:
        raw = tomllib.loads(text.removeprefix("\ufeff"))  # a UTF-8 BOM is not TOML's concern
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", source=source) from exc
    except RecursionError:
        raise SpecError(_TOO_DEEP, source=source) from None
    return _spec_from_mapping(raw, source=source)


def _translate(exc: ValidationError, source: str) -> SpecError:
    errors = exc.errors()
    # An unknown key (a typo) explains the "field required" errors that follow it: report it first.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    message = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    return SpecError(message, source=source, path=_loc(first["loc"]))


def _spec_from_mapping(raw: Mapping[str, object], *, source: str = "<spec>") -> DeploymentSpec:
    """Validate an already-parsed mapping (same rules and messages as :func:`parse_spec`); its
    values are read by the model alone."""
    if "services" not in raw:
        raise SpecError("missing table [services]", source=source, path="services")
    try:
        spec = DeploymentSpec.model_validate(dict(raw))
    except ValidationError as exc:
        raise _translate(exc, source) from exc
    except RecursionError:
        raise SpecError(_TOO_DEEP, source=source) from None
    if not spec.services:
        raise SpecError("no services defined", source=source, path="services")
    _check_semantics(spec, source)
    spec._source = source
    return spec


def spec_hash(spec: DeploymentSpec) -> str:
    """A short stable hash of the spec's content (recorded with every measurement)."""
    canon = json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.sha256(canon).hexdigest()[:16]
