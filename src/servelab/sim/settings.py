"""A simulated worker's settings, fixed at start-up from the environment and the command line.

Like the real engine, knobs are read from the process environment ONCE, when the worker starts:
editing an env file afterwards changes nothing until a restart. ``/server_info`` reports them.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from servelab.errors import SimError
from servelab.sim.faults import Faults
from servelab.sim.profile import DEFAULT_PROFILE, HardwareProfile, mla_stall_above

__all__ = [
    "ENV_SEED",
    "ENV_TIME_SCALE",
    "ENV_WAITING_TIMEOUT",
    "ENV_WARMUP_S",
    "Role",
    "WorkerSettings",
    "is_loopback",
    "load_settings",
]

Role = Literal["prefill", "decode"]
ENV_TIME_SCALE = "SERVELAB_SIM_TIME_SCALE"
ENV_WAITING_TIMEOUT = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
ENV_WARMUP_S = "SERVELAB_SIM_WARMUP_S"
ENV_SEED = "SERVELAB_SIM_SEED"


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
    time_scale: float = 1.0
    waiting_timeout_s: float = 300.0
    warmup_s: float = DEFAULT_PROFILE.cold_start_s
    seed: int = 0
    admin: bool = False
    faults: Faults = field(default_factory=Faults)

    def scaled(self, modelled_s: float) -> float:
        """Wall seconds for a modelled duration."""
        return modelled_s * self.time_scale

    def decode_stalls(self, prompt_tokens: int) -> bool:
        """Whether a prompt this long stalls in decode under the MLA KV tile in force."""
        above = mla_stall_above(self.profile, self.mla_kv_tile)
        return above is not None and prompt_tokens > above

    def knobs(self) -> dict[str, Any]:
        """The effective knob values (what ``/server_info`` reports)."""
        return {
            self.profile.knob_name: self.target_ctas,
            self.profile.mla_tile_knob_name: self.mla_kv_tile,
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


def load_settings(
    role: Role,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    fault_overrides: Mapping[str, Any] | None = None,
) -> WorkerSettings:
    """Settings from ``env`` (default: the process environment, read now) and CLI overrides.

    ``overrides`` are non-None command-line values (they win over the environment).
    """
    source = os.environ if env is None else env
    profile = DEFAULT_PROFILE
    values: dict[str, Any] = {
        "target_ctas": _int_knob(source, profile.knob_name, profile.knob_default, 1),
        "mla_kv_tile": _int_knob(source, profile.mla_tile_knob_name, profile.mla_tile_default, 0),
        "time_scale": _number(source, ENV_TIME_SCALE, 1.0, positive=True),
        "waiting_timeout_s": _number(source, ENV_WAITING_TIMEOUT, 300.0, positive=True),
        "warmup_s": _number(source, ENV_WARMUP_S, profile.cold_start_s, positive=False),
        "seed": int(_number(source, ENV_SEED, 0, positive=False)),
        "faults": Faults.from_env(source).updated(dict(fault_overrides or {})),
    }
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    settings = WorkerSettings(role=role, profile=profile, **values)
    if settings.time_scale <= 0:
        raise SimError("time scale must be > 0")
    if settings.admin and not is_loopback(settings.host):
        raise SimError("--admin is only allowed on a loopback bind (127.0.0.1, ::1, localhost)")
    if role == "prefill" and settings.bootstrap_port is None:
        raise SimError("a prefill worker needs --bootstrap-port")
    return settings
