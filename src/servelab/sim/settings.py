"""A simulated worker's settings, fixed at start-up from the environment and the command line.

Like the real engine, knobs are read from the process environment ONCE, when the worker starts:
editing an env file afterwards changes nothing until a restart. ``/server_info`` reports them.
The engine's arguments (``servelab.sim.engineargs``) are kept as given; ``limits`` is their
effect on the model and ``server_args`` what the engine reports (both resolved once, by
``servelab.sim.limits``).
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from servelab.errors import SimError
from servelab.sim.engineargs import Engine, ParsedArgs, SglangArgs, VllmArgs
from servelab.sim.faults import ENV_VARS as FAULT_ENV_VARS
from servelab.sim.faults import Faults, parse_flag
from servelab.sim.kvlayout import KvLayout
from servelab.sim.limits import Limits, resolve
from servelab.sim.profile import (
    DEFAULT_PROFILE,
    HardwareProfile,
    decode_step_s,
    mla_stall_above,
    sched_gap_s,
)

__all__ = [
    "ENV_EXTRAS",
    "ENV_SEED",
    "ENV_TIME_SCALE",
    "ENV_WAITING_TIMEOUT",
    "ENV_WARMUP_S",
    "Role",
    "WorkerSettings",
    "is_loopback",
    "load_settings",
    "settings_from_args",
]

Role = Literal["prefill", "decode"]
ENV_TIME_SCALE = "SERVELAB_SIM_TIME_SCALE"
ENV_WAITING_TIMEOUT = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
ENV_WARMUP_S = "SERVELAB_SIM_WARMUP_S"
ENV_SEED = "SERVELAB_SIM_SEED"
#: OTLP/gRPC ``HOST:PORT`` the worker exports its request spans to (tracing is off without it,
#: unless the engine's own arguments switch it on).
ENV_OTLP = "SERVELAB_SIM_OTLP_ENDPOINT"
#: ``1``: the worker also answers what only the simulator's own tests read (the ``servelab``
#: object of ``/server_info``: knobs, faults, counters, recent rooms); unset, every answer is the
#: real engine's contract (``tests/contracts/``).
ENV_EXTRAS = "SERVELAB_SIM_EXTRAS"


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a worker needs to run, in force for its whole life."""

    role: Role
    host: str = "127.0.0.1"
    port: int = 30000
    bootstrap_port: int | None = None
    served_model_name: str = "servelab-sim"
    profile: HardwareProfile = DEFAULT_PROFILE
    target_ctas: int = DEFAULT_PROFILE.knob_default
    mla_kv_tile: int = DEFAULT_PROFILE.mla_tile_default
    #: the indexer keys kept in bf16 (``SGLANG_NSA_INDEX_KEYS_BF16=1``): faster decode steps,
    #: and answers altered above 16 running requests (``servelab.sim.answers``)
    index_keys_bf16: bool = False
    time_scale: float = 1.0
    waiting_timeout_s: float = 300.0
    warmup_s: float = DEFAULT_PROFILE.cold_start_s
    seed: int = 0
    admin: bool = False
    faults: Faults = field(default_factory=Faults)
    otlp_endpoint: str | None = None
    extras: bool = False
    engine_args: SglangArgs | VllmArgs = field(default_factory=SglangArgs)

    @cached_property
    def _resolved(self) -> tuple[SglangArgs | VllmArgs, Limits]:
        return resolve(self.engine_args, self.profile, self.role)

    @property
    def engine(self) -> Engine:
        """The engine this worker answers as (its arguments' kind)."""
        return Engine.VLLM if isinstance(self.engine_args, VllmArgs) else Engine.SGLANG

    @property
    def server_args(self) -> SglangArgs | VllmArgs:
        """The engine's arguments as it reports them: given values, the rest resolved."""
        return self._resolved[0]

    @property
    def limits(self) -> Limits:
        """What the engine's arguments do to the model (running cap, chunk, KV pool, ...)."""
        return self._resolved[1]

    def decode_step_s(self, batch: int, ctx_tokens: int) -> float:
        """Modelled seconds of one decode step: the kernel model for the knob in force, plus
        the CPU scheduling gap when the overlap scheduler is off."""
        step = decode_step_s(
            self.profile, batch, ctx_tokens, self.target_ctas, self.index_keys_bf16
        )
        return step if self.limits.overlap_schedule else step + sched_gap_s(self.profile, batch)

    def scaled(self, modelled_s: float) -> float:
        """Wall seconds for a modelled duration."""
        return modelled_s * self.time_scale

    def decode_stalls(self, prompt_tokens: int) -> bool:
        """Whether a prompt this long stalls in decode under the MLA KV tile in force."""
        above = mla_stall_above(self.profile, self.mla_kv_tile)
        return above is not None and prompt_tokens > above

    @property
    def kv_layout(self) -> KvLayout:
        """The KV layout this worker hands over (or expects): page size, KV dtype, model."""
        args = self.server_args
        model = args.model if isinstance(args, VllmArgs) else args.served_model_name
        return KvLayout(self.limits.page_size, args.kv_cache_dtype, model or "servelab-sim")

    def knobs(self) -> dict[str, Any]:
        """The effective knob values (what ``/server_info`` reports)."""
        return {
            self.profile.knob_name: self.target_ctas,
            self.profile.mla_tile_knob_name: self.mla_kv_tile,
            self.profile.nsa_bf16_knob_name: int(self.index_keys_bf16),
            ENV_TIME_SCALE: self.time_scale,
            ENV_WAITING_TIMEOUT: self.waiting_timeout_s,
            ENV_WARMUP_S: self.warmup_s,
        }


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _number(env: Mapping[str, str], name: str, default: float, *, positive: bool) -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise SimError(f"{name} must be a number, got {raw!r}") from exc
    if not math.isfinite(value):
        raise SimError(f"{name} must be a finite number, got {raw!r}")
    if value < 0 or (positive and value == 0):
        raise SimError(f"{name} must be {'> 0' if positive else '>= 0'}, got {raw!r}")
    return value


def _int_knob(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise SimError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise SimError(f"{name} must be >= {minimum}, got {value}")
    return value


def _flag_knob(env: Mapping[str, str], name: str) -> bool:
    """A boolean knob: ``1``/``true``... on; unset, ``0``/``false``... off; else an error."""
    return parse_flag(name, env.get(name, ""))


def load_settings(
    role: Role,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    fault_overrides: Mapping[str, Any] | None = None,
    profile: HardwareProfile = DEFAULT_PROFILE,
) -> WorkerSettings:
    """Settings from ``env`` (default: the process environment, read now) and CLI overrides.

    ``overrides`` are non-None command-line values (they win over the environment); ``profile``
    names the knob read (the vLLM simulator's profile names its own).
    """
    source = os.environ if env is None else env
    values: dict[str, Any] = {
        "target_ctas": _int_knob(source, profile.knob_name, profile.knob_default, 1),
        "mla_kv_tile": _int_knob(source, profile.mla_tile_knob_name, profile.mla_tile_default, 0),
        "index_keys_bf16": _flag_knob(source, profile.nsa_bf16_knob_name),
        "time_scale": _number(source, ENV_TIME_SCALE, 1.0, positive=True),
        "waiting_timeout_s": _number(source, ENV_WAITING_TIMEOUT, 300.0, positive=True),
        "warmup_s": _number(source, ENV_WARMUP_S, profile.cold_start_s, positive=False),
        "seed": int(_number(source, ENV_SEED, 0, positive=False)),
        "faults": Faults.from_env(source).updated(dict(fault_overrides or {})),
        "otlp_endpoint": source.get(ENV_OTLP) or None,
        "extras": source.get(ENV_EXTRAS, "") == "1",
    }
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    settings = WorkerSettings(role=role, profile=profile, **values)
    if settings.time_scale <= 0:
        raise SimError("time scale must be > 0")
    if settings.admin and not is_loopback(settings.host):
        raise SimError("--admin is only allowed on a loopback bind (127.0.0.1, ::1, localhost)")
    if role == "prefill" and settings.bootstrap_port is None:
        raise SimError("a prefill worker needs --bootstrap-port")
    settings.limits  # noqa: B018 -- resolve now: memory that does not fit fails the start
    return settings


#: servelab options that are settings (by the option's name), and the setting each one sets.
_SETTING_OPTIONS = {
    "time_scale": "time_scale",
    "seed": "seed",
    "warmup_s": "warmup_s",
    "admin": "admin",
    "waiting_timeout": "waiting_timeout_s",
}


def _otlp_endpoint(server: SglangArgs | VllmArgs) -> str | None:
    """Where the engine's arguments send its spans: SGLang traces only with ``--enable-trace``
    (to ``--otlp-traces-endpoint``, default ``localhost:4317``); vLLM with
    ``--otlp-traces-endpoint``."""
    if isinstance(server, VllmArgs):
        return server.otlp_traces_endpoint
    return server.otlp_traces_endpoint if server.enable_trace else None


def settings_from_args(
    args: ParsedArgs, *, profile: HardwareProfile, env: Mapping[str, str] | None = None
) -> WorkerSettings:
    """A worker's settings from its parsed command line (which wins) and ``env``."""
    server = args.server
    overrides: dict[str, Any] = {
        "host": server.host,
        "port": server.port,
        "served_model_name": server.served_model_name,
        "otlp_endpoint": _otlp_endpoint(server),
        "engine_args": server,
    }
    if isinstance(server, SglangArgs):
        overrides["bootstrap_port"] = server.disaggregation_bootstrap_port
    else:
        overrides["bootstrap_port"] = args.servelab.get("bootstrap_port")
    for option, name in _SETTING_OPTIONS.items():
        overrides[name] = args.servelab.get(option)
    faults = {k: v for k, v in args.servelab.items() if k in FAULT_ENV_VARS}
    return load_settings(
        args.role, env=env, overrides=overrides, fault_overrides=faults, profile=profile
    )
