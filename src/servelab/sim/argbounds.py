"""The bounds of every numeric option of a simulated worker, checked at the command line's edge.

argparse only checks that a value is an ``int`` or a ``float``: ``--max-total-tokens 0``,
``--max-running-requests -5`` or ``--time-scale nan`` would start a worker that answers
``/health`` 200 and hangs every request, and ``--port 99999`` or ``--mem-fraction-static nan``
would end in a traceback. Each number is held here to what its meaning allows (as the real
engines' own checks do where they have them: vLLM's ``gpu_memory_utilization`` is within (0, 1]):
finite, a port within 1-65535, a count at least 1, a fraction within (0, 1], a probability within
[0, 1], a duration at most a day (``docs/sim.md``, "Arguments"). :func:`out_of_bounds` names the
first option outside its bounds, with the value given.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BOUNDS", "Bound", "out_of_bounds"]

#: The longest modelled duration an option may ask for (a day, in seconds).
_DAY_S = 86_400.0
#: The largest count (tokens, requests, ...) an option may ask for.
_MAX_COUNT = 1 << 40


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low`` excluded when ``open_low``); always finite."""

    low: float
    high: float
    open_low: bool = False

    def allows(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if value > self.high:
            return False
        return value > self.low if self.open_low else value >= self.low

    def describe(self) -> str:
        low = "(" if self.open_low else "["
        return f"a finite number within {low}{_number(self.low)}, {_number(self.high)}]"


def _number(x: float) -> str:
    """``x`` as a bound is written: ``2**40`` rather than ``1.09951e+12``."""
    for exact, text in ((_MAX_COUNT, "2**40"), ((1 << 63) - 1, "2**63-1")):
        if x == exact:
            return text
    return f"{x:g}"


_PORT = Bound(1, 65_535)
_COUNT = Bound(1, _MAX_COUNT)
_FRACTION = Bound(0, 1, open_low=True)
_PROB = Bound(0, 1)
_SECONDS = Bound(0, _DAY_S)

#: Every numeric option by its destination (the flag with ``_`` for ``-``), both engines'.
BOUNDS: Mapping[str, Bound] = {
    # the engines' arguments
    "port": _PORT,
    "disaggregation_bootstrap_port": _PORT,
    "bootstrap_port": _PORT,
    "max_running_requests": _COUNT,
    "max_total_tokens": _COUNT,
    "chunked_prefill_size": Bound(-1, _MAX_COUNT),  # -1 (or 0): no chunking, as SGLang
    "max_prefill_tokens": _COUNT,
    "mem_fraction_static": _FRACTION,
    "context_length": _COUNT,
    "page_size": _COUNT,
    "max_num_seqs": _COUNT,
    "max_num_batched_tokens": _COUNT,
    "max_model_len": _COUNT,
    "gpu_memory_utilization": _FRACTION,  # vLLM's CacheConfig: gt=0, le=1
    "block_size": _COUNT,
    # servelab's options
    "time_scale": Bound(0, 1_000, open_low=True),
    "seed": Bound(0, (1 << 63) - 1),
    "warmup_s": _SECONDS,
    "waiting_timeout": Bound(0, _DAY_S, open_low=True),
    "transfer_fail_prob": _PROB,
    "corrupt_under_load": Bound(0, _MAX_COUNT),
    "slow_start_s": _SECONDS,
    "transfer_fail_over_tokens": Bound(0, _MAX_COUNT),
    "fail_fast_s": _SECONDS,
    "batch_nondeterminism": Bound(0, 64),
    "kv_leak": _PROB,
}


def out_of_bounds(values: Mapping[str, Any]) -> tuple[str, Any, Bound] | None:
    """The first numeric option in ``values`` (by destination; ``None``: not given) outside its
    bounds: its flag, the value given, and the bound; None when every one is within."""
    for dest, bound in BOUNDS.items():
        value = values.get(dest)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not bound.allows(value):
            return "--" + dest.replace("_", "-"), value, bound
    return None
