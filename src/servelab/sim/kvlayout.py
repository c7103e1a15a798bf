"""What a simulated prefill hands a decode about its KV cache, and what a mismatch does, as the real
engines do (``tests/contracts/pair.toml`` cites the source):

- **SGLang** (Mooncake, ``disaggregation/mooncake/conn.py``): the prefill writes its pages into the
  decode's page slots by index, with its own page length, and checks nothing of the decode's page
  size or KV dtype (a page-count mismatch is truncated with a warning, "this should never
  happen"). A page-size or KV-dtype mismatch therefore moves KV that the decode reads wrongly:
  **wrong answers**, no error, no hang. The simulated decode answers with its text garbled.
- **vLLM** (NIXL): the decode's handshake with the prefill compares a compatibility hash of the
  model, dtype and KV cache dtype (``nixl/metadata.py`` ``compute_nixl_compatibility_hash``:
  "NIXL compatibility hash mismatch") and validates the remote block size
  (``_validate_remote_agent_handshake``: only a prefill block that divides the decode's is
  re-blocked on receipt). Either failure fails the KV load: the simulated decode fails the
  request (``kv_load_failure_policy = "fail"``), an **error**, not a hang.

Pure.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from servelab.sim.text import Output

__all__ = ["KvLayout", "garbled", "nixl_refusal", "sglang_corrupts"]


@dataclass(frozen=True)
class KvLayout:
    """A worker's KV layout as it hands it over: tokens per page (block), KV cache dtype, model."""

    page_size: int
    kv_dtype: str
    model: str

    def to_json(self) -> dict[str, Any]:
        return {"page_size": self.page_size, "kv_cache_dtype": self.kv_dtype, "model": self.model}

    @classmethod
    def read(cls, doc: object) -> KvLayout | None:
        """A layout from its JSON (None when absent or malformed)."""
        if not isinstance(doc, Mapping):
            return None
        page, dtype, model = doc.get("page_size"), doc.get("kv_cache_dtype"), doc.get("model")
        if not isinstance(page, int) or not isinstance(dtype, str) or not isinstance(model, str):
            return None
        return cls(page, dtype, model)


def sglang_corrupts(decode: KvLayout, prefill: KvLayout | None) -> bool:
    """SGLang's Mooncake hand-off moves pages the decode misreads (wrong answers)."""
    if prefill is None:
        return False
    return prefill.page_size != decode.page_size or prefill.kv_dtype != decode.kv_dtype


def nixl_refusal(decode: KvLayout, prefill: KvLayout | None) -> str | None:
    """Why vLLM's NIXL handshake refuses the prefill (None: it accepts)."""
    if prefill is None:
        return None
    if (prefill.model, prefill.kv_dtype) != (decode.model, decode.kv_dtype):
        return (
            "NIXL compatibility hash mismatch: the prefill runs model "
            f"{prefill.model} with KV cache dtype {prefill.kv_dtype}, this decode "
            f"{decode.model} with {decode.kv_dtype}"
        )
    if decode.page_size % prefill.page_size != 0:
        return (
            f"Remote P worker KV layer cache does not fit: the prefill's block size "
            f"{prefill.page_size} does not divide this decode's {decode.page_size}"
        )
    return None


def garbled(out: Output) -> Output:
    """``out`` as a decode computing on misplaced KV answers: every piece after the first (the
    prefill's token) changed."""
    first, rest = out.pieces[0], out.pieces[1:]
    return replace(out, pieces=(first, *(codecs.encode(p, "rot13") for p in rest)))
