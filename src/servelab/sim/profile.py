"""The simulator's performance model: a hardware profile and pure step-time functions.

PURE: no I/O, no clock, no randomness. Every duration is in modelled seconds at time scale 1.0.

Decode step (one continuous-batching iteration over a batch of ``B`` requests) models the split-K
GEMM whose CTA count the knob ``SGLANG_SM120_MMA_TARGET_CTAS`` targets::

    tiles(B)  = ceil(B / tile_m) * n_tiles
    splits    = clamp(ceil(TARGET_CTAS / tiles(B)), 1, max_splits)
    N         = tiles(B) * splits
    e_wave(N) = (N / (SM * k)) / ceil(N / (SM * k))        # wave quantization
    t_kernel  = (work_fixed + work_per_req * B) / e_wave(N) + t_combine * N
    t_step    = t_fixed + t_kernel + t_req * B + kv_read_s_per_token * (context tokens of the batch)

Sources of the shapes: flash-attention ``num_splits_heuristic`` (splits and waves), SGLang
``get_num_kv_splits_triton``, NVIDIA's matrix-multiplication guide (tile and wave quantization),
Vidur/BLIS (per-step and per-request overheads).

Calibration (see ``tests/sim/test_profile.py`` and ``benchmarks/sim_calibration.py``): with the
default profile (128 in / 64 out), 512 against 256 gives +12.8% at C64, -0.0% at C80 (both arms
fill the same waves there), +5.7% at C96; with 256 thr(C96) is ~2.8% below thr(C80), with 512 it
is ~2.7% above. t_fixed / work / t_req were fitted on a grid to those targets with the step
time at C64 held at ~40 ms (a realistic DeepSeek PCIe decode ITL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DEFAULT_PROFILE",
    "HardwareProfile",
    "ctas",
    "decode_step_s",
    "kv_transfer_s",
    "mla_stall_above",
    "prefill_chunk_s",
    "prefill_s",
    "sched_gap_s",
    "steady_throughput",
    "wave_efficiency",
]


@dataclass(frozen=True)
class HardwareProfile:
    """A deployment's hardware and model constants. Defaults: the reference deployment.

    The reference is DeepSeek on 8x RTX PRO 6000 Blackwell (SM120) over PCIe, decode with TP8.
    """

    name: str = "rtx-pro-6000-blackwell-deepseek"
    # Streaming multiprocessors of one RTX PRO 6000 Blackwell (GB202, 188 SMs enabled).
    sm_count: int = 188
    # CTAs resident per SM for the decode MMA kernel: its tile uses most of the 100 KB SMEM/regs,
    # so one CTA per SM (a second would not fit), hence a "wave" is 188 CTAs.
    ctas_per_sm: int = 1
    # Rows (batch) per output tile: the SM120 MMA kernel's M tile for skinny decode GEMMs.
    tile_m: int = 16
    # Output tiles along N of the decode GEMM (hidden 7168 / TP-sharded width / 224-wide N tile
    # -> 32). With tile_m=16 this makes C64/C80/C96 = 128/160/192 tiles: 192 > 188 SMs is exactly
    # why C96 at 256 CTAs spills into a third, nearly empty wave (the incident's anomaly).
    n_tiles: int = 32
    # Upper bound on split-K factor (K=7168 split into >=896-wide slices keeps each CTA busy).
    max_splits: int = 8
    # Per-step fixed cost: scheduler, CUDA-graph launch, sampling, all-reduce latency across 8
    # PCIe GPUs (no NVLink): ~13 ms, the bulk of DeepSeek decode ITL on PCIe boxes.
    t_fixed_s: float = 13e-3
    # GEMM work that does not grow with batch (streaming the weights once per step), in seconds
    # at 100% wave efficiency.
    work_fixed_s: float = 4e-3
    # GEMM work per batch row at 100% wave efficiency (activations, MoE experts touched per token).
    work_per_req_s: float = 0.14e-3
    # Cost of reducing split-K partials per CTA: a 16x224 fp32 partial written and read back
    # (~28 KB at ~1.8 TB/s GDDR7 is ~15 ns); 10 ns amortized with overlap.
    t_combine_s: float = 10e-9
    # Per-request per-step overhead outside the GEMM (attention launch, MoE routing, detokenize).
    t_req_s: float = 0.14e-3
    # KV-read term: MLA latent KV bytes per token (61 layers * 576 * 2 bytes = 70,272 B, replicated
    # per TP rank) read at ~1.8 TB/s -> ~39 ns per context token per step.
    kv_bytes_per_token: int = 70_272
    hbm_bw_bytes_s: float = 1.8e12
    # Prefill t = a + b*T + c*T^2: a = launch + scheduling of a prefill batch, b = linear FLOPs per
    # token (~20k tok/s for DeepSeek on 8 PCIe GPUs), c = attention's quadratic term.
    prefill_a_s: float = 15e-3
    prefill_b_s: float = 50e-6
    prefill_c_s: float = 1e-9
    # KV transfer prefill -> decode over PCIe Gen5 x16 (no NVLink): ~40 GB/s effective, plus a
    # bootstrap handshake / memory-registration setup of ~5 ms per request.
    link_bw_bytes_s: float = 40e9
    transfer_setup_s: float = 5e-3
    # One-time warm-up of the first request after start (CUDA-graph capture, JIT): the incident's
    # first request took 17.9 s end to end, of which ~17 s was warm-up.
    cold_start_s: float = 17.0
    # Process start until /health answers 200 (weights already in page cache), modelled seconds.
    startup_s: float = 2.0
    # The decode knob: its environment variable and the engine's default value.
    knob_name: str = "SGLANG_SM120_MMA_TARGET_CTAS"
    knob_default: int = 256
    # The decode attention knob: KV tokens per split tile of the SM120 MLA decode kernel; 0 = auto
    # (the tile grows with the context). Its split workspace holds ``mla_max_kv_splits`` partials:
    # a context needing more splits than that makes the split-reduce wait for a partial that is
    # never written, so the request never gets a token out of decode (see :func:`mla_stall_above`).
    mla_tile_knob_name: str = "SGLANG_SM120_MLA_KV_TILE"
    mla_tile_default: int = 0
    mla_max_kv_splits: int = 64
    # The sparse-attention indexer's keys (DeepSeek-V3.2's DSA): the incident's custom build reads
    # ``SGLANG_NSA_INDEX_KEYS_BF16=1`` to keep them in bf16 under CUDA-graph capture instead of
    # quantizing them to fp8 every step. The model: each running request's per-step cost (inside
    # ``t_req_s``) loses the keys' quantize/dequantize, 60 us of its 140 us: 3.8 ms of the step at
    # C64, +10.1% output throughput there (256 CTAs, 128 in / 64 out; +11.6% with 512 CTAs,
    # +12.6% at C80, +12.2% at C96, +4.0% at C16). What it does to answers:
    # ``servelab.sim.answers``.
    nsa_bf16_knob_name: str = "SGLANG_NSA_INDEX_KEYS_BF16"
    nsa_bf16_saving_per_req_s: float = 60e-6
    # CPU scheduling gap the GPU waits out between two decode steps when the overlap scheduler is
    # off (SGLang ``--disable-overlap-schedule``): batch assembly, radix-cache and output
    # processing, growing with the batch. Calibrated to SGLang v0.4's release note ("zero-overhead
    # batch scheduler: 1.1x increase in throughput"): 1.5 ms + 35 us per request is ~10% of the
    # modelled step at C64 (3.7 ms of 36.6 ms), so overlap on is ~1.1x overlap off there.
    sched_gap_fixed_s: float = 1.5e-3
    sched_gap_per_req_s: float = 35e-6
    # Memory (for the KV pool, ``servelab.sim.limits``). The card's memory as nvidia-smi reports
    # an RTX PRO 6000 Blackwell (96 GB GDDR7): 97,887 MiB. The weights per GPU: an NVFP4
    # DeepSeek-R1 checkpoint (~415 GB) over TP8, ~48.5 GiB per GPU (an assumption: the incident
    # does not name the quantization; FP8 weights would not leave room for a KV pool on 8 cards).
    gpu_mem_mib: int = 97_887
    weight_gib_per_gpu: float = 48.5
    tp_size: int = 8
    # DeepSeek-V3/R1's config.json max_position_embeddings (what SGLang's --context-length and
    # vLLM's --max-model-len default to).
    context_length: int = 163_840


DEFAULT_PROFILE = HardwareProfile()


def ctas(profile: HardwareProfile, batch: int, target_ctas: int) -> int:
    """The number of CTAs the split-K decode GEMM launches for ``batch`` rows."""
    tiles = math.ceil(max(batch, 1) / profile.tile_m) * profile.n_tiles
    splits = min(max(math.ceil(target_ctas / tiles), 1), profile.max_splits)
    return tiles * splits


def wave_efficiency(profile: HardwareProfile, n_ctas: int) -> float:
    """Fraction of the launched waves' CTA slots that do work (1.0 = full waves)."""
    per_wave = profile.sm_count * profile.ctas_per_sm
    waves = n_ctas / per_wave
    return waves / math.ceil(waves)


def decode_step_s(
    profile: HardwareProfile, batch: int, ctx_tokens: int, target_ctas: int,
    index_keys_bf16: bool = False,
) -> float:  # fmt: skip
    """Modelled duration of one decode iteration over ``batch`` requests.

    ``ctx_tokens`` is the total context (prompt + generated) of the batch's requests;
    ``index_keys_bf16``: the indexer keys stay bf16 (``nsa_bf16_saving_per_req_s`` per request).
    """
    if batch <= 0:
        return 0.0
    n = ctas(profile, batch, target_ctas)
    work = profile.work_fixed_s + profile.work_per_req_s * batch
    t_kernel = work / wave_efficiency(profile, n) + profile.t_combine_s * n
    kv_read = ctx_tokens * profile.kv_bytes_per_token / profile.hbm_bw_bytes_s
    t_req = profile.t_req_s - (profile.nsa_bf16_saving_per_req_s if index_keys_bf16 else 0.0)
    return profile.t_fixed_s + t_kernel + t_req * batch + kv_read


def prefill_s(profile: HardwareProfile, new_tokens: int) -> float:
    """Modelled duration of prefilling ``new_tokens`` of one sequence."""
    t = max(new_tokens, 0)
    return profile.prefill_a_s + profile.prefill_b_s * t + profile.prefill_c_s * t * t


def prefill_chunk_s(profile: HardwareProfile, new_tokens: int, prefix_tokens: int) -> float:
    """The compute (without the batch's launch cost ``prefill_a_s``) of prefilling ``new_tokens``
    that follow ``prefix_tokens`` already in the KV cache (a cached prefix, or the chunks before).

    Linear in the new tokens; the attention term is what the new tokens add to the whole
    sequence's ``c * T^2``: ``c * ((prefix + new)^2 - prefix^2)``. A prompt prefilled in chunks
    costs the same compute as in one piece (plus one ``prefill_a_s`` per batch it rides in);
    with a cached prefix only the uncached tokens are computed.
    """
    n, p = max(new_tokens, 0), max(prefix_tokens, 0)
    return profile.prefill_b_s * n + profile.prefill_c_s * ((p + n) ** 2 - p * p)


def sched_gap_s(profile: HardwareProfile, batch: int) -> float:
    """The CPU scheduling gap before each decode step when the overlap scheduler is off."""
    return profile.sched_gap_fixed_s + profile.sched_gap_per_req_s * max(batch, 0)


def kv_transfer_s(profile: HardwareProfile, tokens: int) -> float:
    """Modelled duration of moving ``tokens`` of KV from prefill to decode."""
    return profile.transfer_setup_s + max(tokens, 0) * profile.kv_bytes_per_token / (
        profile.link_bw_bytes_s
    )


def mla_stall_above(profile: HardwareProfile, kv_tile: int) -> int | None:
    """Prompt tokens above which decode stalls with this MLA KV tile (None: never, tile = auto).

    A pinned tile ``T`` covers at most ``T * mla_max_kv_splits`` tokens of context.
    """
    if kv_tile <= 0:
        return None
    return kv_tile * profile.mla_max_kv_splits


def steady_throughput(
    profile: HardwareProfile, concurrency: int, target_ctas: int, in_len: int, out_len: int,
    index_keys_bf16: bool = False,
) -> float:  # fmt: skip
    """Closed-loop steady-state output tokens/s at ``concurrency`` users.

    Each user's cycle is prefill + KV transfer, then ``out_len - 1`` decode steps (the first
    token comes from prefill). Decode dominates, so the batch is ~C; the mean context of a
    request over its decode is ``in_len + out_len / 2``.
    """
    if concurrency <= 0 or out_len <= 0:
        return 0.0
    ctx = concurrency * (in_len + out_len // 2)
    step = decode_step_s(profile, concurrency, ctx, target_ctas, index_keys_bf16)
    cycle = prefill_s(profile, in_len) + kv_transfer_s(profile, in_len) + (out_len - 1) * step
    return concurrency * out_len / cycle
