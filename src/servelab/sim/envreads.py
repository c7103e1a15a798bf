"""The environment variables the simulated engines read: their registry, as SGLang keeps one
(``python/sglang/srt/environ.py``), and vLLM's start-up warning for a ``VLLM_*`` variable it does
not read (``vllm/envs.py`` ``validate_environ``: ``Unknown vLLM environment variable detected:
NAME``).

The simulator is a build of its own (its version carries the ``+sim`` label): it reads the
upstream release's variables (:mod:`servelab.core.knobs.engineenv`) and, beyond them, the ones its
model reads (:data:`SIM_READS`), as a custom build of SGLang reads a kernel knob its upstream
does not.
"""

from __future__ import annotations

from collections.abc import Mapping

from servelab.core.engines import SGLANG_KNOB, VLLM_KNOB
from servelab.core.knobs.engineenv import env_list

__all__ = ["SIM_READS", "unknown_vllm_variables", "vllm_warnings"]

#: What the simulated engines' model reads besides the upstream release's variables (the decode
#: knobs, the MLA KV tile, the simulator's own switches).
SIM_READS: frozenset[str] = frozenset({
    SGLANG_KNOB, VLLM_KNOB, "SGLANG_SM120_MLA_KV_TILE", "VLLM_SM120_MLA_KV_TILE",
    "SERVELAB_SIM_TIME_SCALE", "SERVELAB_SIM_WARMUP_S", "SERVELAB_SIM_SEED",
    "SERVELAB_SIM_OTLP_ENDPOINT", "SERVELAB_SIM_EXTRAS", "SERVELAB_SIM_SLOW_START_S",
    "SERVELAB_SIM_TRANSFER_FAIL_PROB", "SERVELAB_SIM_ABORT_WEDGE",
    "SERVELAB_SIM_CORRUPT_UNDER_LOAD", "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS",
    "SERVELAB_SIM_WEDGE", "SERVELAB_SIM_NO_METRICS", "SERVELAB_SIM_FAIL_FAST_S",
})  # fmt: skip


def unknown_vllm_variables(env: Mapping[str, str], version: str) -> list[str]:
    """The ``VLLM_*`` variables of ``env`` that the simulated vLLM does not read (sorted)."""
    known = env_list("vllm", version)
    names = known.names if known is not None else frozenset()
    return sorted(n for n in env if n.startswith("VLLM_") and n not in names | SIM_READS)


def vllm_warnings(env: Mapping[str, str], version: str) -> list[str]:
    """vLLM's start-up warning lines for ``env``, one per variable it does not read."""
    return [
        f"Unknown vLLM environment variable detected: {name}"
        for name in unknown_vllm_variables(env, version)
    ]
