"""What a worker's engine arguments do to the model: resolved as the real engines resolve them.

PURE: no I/O. :func:`resolve` turns the arguments a worker was given (``servelab.sim.engineargs``)
into the values the engine reports (SGLang fills ``chunked_prefill_size``, ``mem_fraction_static``,
``page_size``; vLLM ``max_num_seqs``, ``max_num_batched_tokens``, ``block_size``...) and the
engine-neutral :class:`Limits` the schedulers and the prefix cache obey.

Memory, as SGLang sizes its KV pool (``server_args.py`` ``_handle_gpu_memory_settings``,
``mem_cache/kv_cache_configurator.py``): on a card of 90-160 GiB, ``chunked_prefill_size`` is
8192 and the decode CUDA-graph batch 512; an unset ``mem_fraction_static`` is ``(gpu - reserved)
/ gpu`` with ``reserved = 512 MiB + 1.5 MiB x activation tokens + 1 GiB x tp/8`` and at least
10 GiB on a card over 60 GiB (activation tokens: a decode's running requests, else the prefill
chunk, at least 2048; the CUDA-graph reserve is not modelled); the pool is ``mem_fraction_static x
gpu - weights`` over the KV bytes per token, page-aligned, capped by ``--max-total-tokens``; the
running batch is ``--max-running-requests`` (or ``clamp(pool / context_length x 512, 2048, 4096)``)
and at most half the pool. vLLM: ``gpu_memory_utilization x gpu - weights - activations``
(the same activation estimate), ``max_num_seqs`` 1024 and ``max_num_batched_tokens`` 8192 on a
card of 70 GiB or more (``arg_utils.py`` ``get_batch_defaults``), block size 16, prefix caching on.

The model's sparse-attention top-k (``index_topk``, ``servelab.sim.recall``) is a key of the
model's config, overridden by SGLang's ``--json-model-override-args '{"index_topk": N}'`` and
vLLM's ``--hf-overrides '{"index_topk": N}'`` (both JSON objects; other keys are accepted and not
modelled).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, assert_never

from servelab.errors import SimError
from servelab.sim.engineargs import SglangArgs, VllmArgs
from servelab.sim.profile import HardwareProfile
from servelab.sim.recall import DEFAULT_INDEX_TOPK

__all__ = ["CachedTokens", "Limits", "resolve"]

Role = Literal["prefill", "decode"]
_MIB = 1 << 20
_GIB = 1 << 30
#: SGLang's decode CUDA-graph batch on a 90-160 GiB card with tp >= 4.
_CUDA_GRAPH_MAX_BS = 512
#: SGLang's ``chunked_prefill_size`` on a 90-160 GiB card; vLLM's ``max_num_batched_tokens``
#: on a card of 70 GiB or more.
_CHUNK_TOKENS = 8192
_VLLM_MAX_NUM_SEQS = 1024
_VLLM_BLOCK_SIZE = 16


class CachedTokens(StrEnum):
    """How a response reports ``usage.prompt_tokens_details.cached_tokens``."""

    OFF = "off"  # not at all (no --enable-cache-report / --enable-prompt-tokens-details)
    POSITIVE = "positive"  # SGLang: only when > 0, else ``prompt_tokens_details`` is null
    ALWAYS = "always"  # vLLM: always, 0 included


@dataclass(frozen=True)
class Limits:
    """The engine arguments' effect on the model, resolved (engine-neutral)."""

    max_running_requests: int  # the running batch's cap
    chunk_tokens: int  # a prefill chunk's tokens at most (0: prompts are not split)
    max_prefill_tokens: int  # a prefill batch's tokens at most
    overlap_schedule: bool  # False: the CPU scheduling gap is added to every decode step
    schedule_policy: str  # the order waiting prefills are taken in
    pool_tokens: int  # the KV pool, in tokens
    page_size: int  # tokens per KV page (the prefix cache's block)
    prefix_cache: bool
    cached_tokens: CachedTokens
    context_length: int
    mem_fraction: float  # SGLang's mem_fraction_static, vLLM's gpu_memory_utilization
    index_topk: int = DEFAULT_INDEX_TOPK  # the sparse-attention top-k (the model's config)


def _index_topk(flag: str, raw: str | None) -> int:
    """``index_topk`` from a model-config override (a JSON object), else the model's own."""
    if raw is None or raw.strip() == "":
        return DEFAULT_INDEX_TOPK
    try:
        overrides = json.loads(raw)
    except ValueError as exc:
        raise SimError(f"{flag} is not valid JSON: {exc}") from exc
    if not isinstance(overrides, dict):
        raise SimError(f"{flag} must be a JSON object")
    value = overrides.get("index_topk", DEFAULT_INDEX_TOPK)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SimError(f"{flag}: index_topk must be an integer >= 1, got {value!r}")
    return value


def _reserved_mib(profile: HardwareProfile, activation_tokens: int) -> float:
    reserved = 512 + 1.5 * max(activation_tokens, 2048) + profile.tp_size / 8 * 1024
    return max(reserved, 10 * 1024) if profile.gpu_mem_mib > 60 * 1024 else reserved


def _pool_tokens(profile: HardwareProfile, budget_bytes: float, page: int, cap: int | None) -> int:
    if budget_bytes <= 0:
        raise SimError(
            "the weights leave no GPU memory for the KV cache: raise the memory fraction"
        )
    tokens = int(budget_bytes // profile.kv_bytes_per_token)
    tokens = min(tokens, cap) if cap is not None else tokens
    return max(tokens // page * page, page)


def _sglang(args: SglangArgs, profile: HardwareProfile, role: Role) -> tuple[SglangArgs, Limits]:
    chunk = _CHUNK_TOKENS if args.chunked_prefill_size is None else args.chunked_prefill_size
    fraction = args.mem_fraction_static
    if fraction is None:
        if role == "decode":
            activation = args.max_running_requests or _CUDA_GRAPH_MAX_BS
        else:
            activation = chunk if chunk > 0 else args.max_prefill_tokens
        gpu = profile.gpu_mem_mib
        fraction = round((gpu - _reserved_mib(profile, activation)) / gpu, 3)
    page = args.page_size or 1
    budget = fraction * profile.gpu_mem_mib * _MIB - profile.weight_gib_per_gpu * _GIB
    pool = _pool_tokens(profile, budget, page, args.max_total_tokens)
    context = args.context_length or profile.context_length
    estimated = max(min(int(pool / context * 512), 4096), 2048)
    running = min(args.max_running_requests or estimated, pool // 2)
    resolved = dataclasses.replace(
        args,
        served_model_name=args.served_model_name or "servelab-sim",
        disaggregation_mode=role,
        chunked_prefill_size=chunk,
        mem_fraction_static=fraction,
        page_size=page,
    )
    report = CachedTokens.POSITIVE if args.enable_cache_report else CachedTokens.OFF
    limits = Limits(
        max_running_requests=running,
        chunk_tokens=max(chunk, 0),
        max_prefill_tokens=args.max_prefill_tokens,
        overlap_schedule=not args.disable_overlap_schedule,
        schedule_policy=args.schedule_policy,
        pool_tokens=pool,
        page_size=page,
        prefix_cache=not args.disable_radix_cache,
        cached_tokens=report,
        context_length=context,
        mem_fraction=fraction,
        index_topk=_index_topk("--json-model-override-args", args.json_model_override_args),
    )
    return resolved, limits


def _vllm(args: VllmArgs, profile: HardwareProfile) -> tuple[VllmArgs, Limits]:
    seqs = args.max_num_seqs or _VLLM_MAX_NUM_SEQS
    batched = args.max_num_batched_tokens or _CHUNK_TOKENS
    block = args.block_size or _VLLM_BLOCK_SIZE
    context = args.max_model_len or profile.context_length
    caching = args.enable_prefix_caching is not False
    budget = (
        args.gpu_memory_utilization * profile.gpu_mem_mib * _MIB
        - profile.weight_gib_per_gpu * _GIB
        - _reserved_mib(profile, batched) * _MIB
    )
    pool = _pool_tokens(profile, budget, block, None)
    resolved = dataclasses.replace(
        args,
        served_model_name=args.served_model_name or "servelab-sim",
        model=args.model or "servelab-sim",
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        max_model_len=context,
        block_size=block,
        enable_prefix_caching=caching,
    )
    report = CachedTokens.ALWAYS if args.enable_prompt_tokens_details else CachedTokens.OFF
    limits = Limits(
        max_running_requests=seqs,
        chunk_tokens=batched,
        max_prefill_tokens=batched,
        overlap_schedule=True,  # vLLM's async scheduling is not modelled: no CPU gap
        schedule_policy="fcfs",
        pool_tokens=pool,
        page_size=block,
        prefix_cache=caching,
        cached_tokens=report,
        context_length=context,
        mem_fraction=args.gpu_memory_utilization,
        index_topk=_index_topk("--hf-overrides", args.hf_overrides),
    )
    return resolved, limits


def resolve(
    args: SglangArgs | VllmArgs, profile: HardwareProfile, role: Role
) -> tuple[SglangArgs | VllmArgs, Limits]:
    """The arguments as the engine reports them (resolved), and their effect on the model."""
    match args:
        case SglangArgs():
            return _sglang(args, profile, role)
        case VllmArgs():
            return _vllm(args, profile)
        case _:
            assert_never(args)
