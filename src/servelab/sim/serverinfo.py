"""The workers' ``/server_info`` bodies, named as the real engines name them (the JSON edge).

SGLang (``entrypoints/http_server.py`` ``server_info()``; ``/get_server_info`` is its deprecated
alias): a flat dict of every server-args field (here the modelled subset, resolved as SGLang
resolves them, plus ``tp_size``/``dp_size`` at the profile's values), then the scheduler's
``status``, ``max_total_num_tokens``, ``max_req_input_len``, ``internal_states`` (one per DP
rank: the args again, ``last_gen_throughput``, ``memory_usage``,
``effective_max_running_requests_per_dp``), ``version`` and ``kv_events``.

vLLM (``entrypoints/serve/dev/server_info``, only with ``VLLM_SERVER_DEV_MODE=1``):
``vllm_config`` (its text; ``?config_format=json`` nests it), ``vllm_env`` (the ``VLLM_*``
variables) and ``system_env``.

With ``SERVELAB_SIM_EXTRAS=1`` (the simulator's own tests) both also carry servelab's
``servelab`` object (``Worker.info()``: knobs, faults, counters); by default they carry exactly
the real engine's keys (``tests/contracts/``).
"""

from __future__ import annotations

import dataclasses
import platform
from collections.abc import Mapping
from typing import Any

from servelab.sim.engineargs import SglangArgs, VllmArgs
from servelab.sim.settings import WorkerSettings

__all__ = [
    "SGLANG_SIM_VERSION",
    "VLLM_SIM_VERSION",
    "sglang_server_info",
    "vllm_config",
    "vllm_server_info",
]

#: The engine versions the workers answer (``version``): the release each contract was read
#: after (``tests/contracts/``), marked as a simulation by a PEP 440 local label.
SGLANG_SIM_VERSION = "0.5.13.post1+sim"
VLLM_SIM_VERSION = "0.26.0+sim"
_GIB = 1 << 30


def _memory_usage(settings: WorkerSettings) -> dict[str, Any]:
    """SGLang's ``memory_usage`` (GB, and the pool's tokens)."""
    limits, profile = settings.limits, settings.profile
    kv_gb = limits.pool_tokens * profile.kv_bytes_per_token / _GIB
    return {
        "weight": round(profile.weight_gib_per_gpu, 2),
        "kvcache": round(kv_gb, 2),
        "token_capacity": limits.pool_tokens,
        "graph": 0.0,
    }


def _extras(settings: WorkerSettings, servelab: Mapping[str, Any]) -> dict[str, Any]:
    """The ``servelab`` object, only with ``SERVELAB_SIM_EXTRAS=1``."""
    return {"servelab": dict(servelab)} if settings.extras else {}


def sglang_server_info(
    settings: WorkerSettings, gen_throughput: float, servelab: Mapping[str, Any]
) -> dict[str, Any]:
    """SGLang's ``/server_info`` for this worker (``servelab``: the extras' object)."""
    args = settings.server_args
    assert isinstance(args, SglangArgs)
    fields = {**dataclasses.asdict(args), "tp_size": settings.profile.tp_size, "dp_size": 1}
    limits = settings.limits
    max_req_len = min(limits.context_length - 1, limits.pool_tokens - 1)
    state = {
        **fields,
        "last_gen_throughput": round(gen_throughput, 3),
        "memory_usage": _memory_usage(settings),
        "effective_max_running_requests_per_dp": limits.max_running_requests,
    }
    return {
        **fields,
        "status": "ready",
        "max_total_num_tokens": limits.pool_tokens,
        "max_req_input_len": max_req_len - 5,
        "internal_states": [state],
        "version": SGLANG_SIM_VERSION,
        "kv_events": None,
        **_extras(settings, servelab),
    }


def vllm_config(settings: WorkerSettings, engine_id: str) -> dict[str, Any]:
    """The modelled part of vLLM's ``VllmConfig``, by section (``?config_format=json``)."""
    args = settings.server_args
    assert isinstance(args, VllmArgs)
    role = "kv_producer" if settings.role == "prefill" else "kv_consumer"
    blocks = settings.limits.pool_tokens // settings.limits.page_size
    return {
        "model_config": {"model": args.model, "revision": args.revision,
                         "served_model_name": args.served_model_name,
                         "max_model_len": args.max_model_len},
        "cache_config": {"block_size": args.block_size, "cache_dtype": args.kv_cache_dtype,
                         "gpu_memory_utilization": args.gpu_memory_utilization,
                         "enable_prefix_caching": args.enable_prefix_caching,
                         "num_gpu_blocks": blocks},
        "scheduler_config": {"max_num_seqs": args.max_num_seqs,
                             "max_num_batched_tokens": args.max_num_batched_tokens},
        "parallel_config": {"tensor_parallel_size": settings.profile.tp_size},
        "kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": role,
                               "engine_id": engine_id},
        "observability_config": {"otlp_traces_endpoint": args.otlp_traces_endpoint},
    }  # fmt: skip


def _config_text(config: Mapping[str, Any]) -> str:
    """``vllm_config`` as vLLM's ``str(VllmConfig)``: ``key=value`` pairs."""
    return ", ".join(
        f"{key}={value!r}" for section in config.values() for key, value in section.items()
    )


def vllm_server_info(
    settings: WorkerSettings,
    engine_id: str,
    vllm_env: Mapping[str, str],
    servelab: Mapping[str, Any],
    *,
    as_json: bool,
) -> dict[str, Any]:
    """vLLM's dev-mode ``/server_info``; ``as_json``: ``?config_format=json`` (``servelab``: the
    extras' object)."""
    config = vllm_config(settings, engine_id)
    return {
        "vllm_config": config if as_json else _config_text(config),
        "vllm_env": dict(sorted(vllm_env.items())),
        "system_env": {"platform": platform.platform(), "python": platform.python_version()},
        **_extras(settings, servelab),
    }
