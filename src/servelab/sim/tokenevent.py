"""One output token's event, the step loop's hot path: :func:`stream_token` renders token ``k`` of
an item for every API (the text so far on ``/generate``, a content or tool-call delta on chat, a
text piece on completions, with its log-probabilities when asked), and :func:`token_frame`
pre-renders the bytes around a plain-text token so an event costs one ``json.dumps(str)``. A
request's other events and bodies are :mod:`servelab.sim.protocol`'s."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from servelab.sim.protocol import GenItem, GenRequest, add_logprobs, envelope, generate_meta, sse
from servelab.sim.text import Output

__all__ = ["TokenFrame", "stream_token", "token_frame"]


def stream_token(
    req: GenRequest, item: GenItem, out: Output, k: int, rid: str, created: int
) -> bytes:
    """The event carrying output token ``k`` (0-based) of ``item``."""
    piece = out.pieces[k]
    if req.api == "generate":
        text = "".join(out.pieces[: k + 1])
        meta = generate_meta(item, rid, k + 1, None)
        return sse({"text": text, "meta_info": meta, "index": item.index})
    if req.api == "completions":
        choice: dict[str, Any] = {"index": item.index, "text": piece}
        add_logprobs(req, choice, out, k, k + 1)
        choice["finish_reason"] = None
        return sse(envelope(req, rid, created, [choice]))
    delta: dict[str, Any]
    if out.tool_name is None:
        delta = {"content": piece}
    elif k == 0:
        fn = {"name": out.tool_name, "arguments": piece}
        delta = {"tool_calls": [{"index": 0, "id": out.tool_call_id, "type": "function"}]}
        delta["tool_calls"][0]["function"] = fn
    else:
        delta = {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
    choice = {"index": item.index, "delta": delta}
    add_logprobs(req, choice, out, k, k + 1)
    choice["finish_reason"] = None
    return sse(envelope(req, rid, created, [choice]))


_SENTINEL = "\x00servelab-piece\x00"


def token_frame(req: GenRequest, item: GenItem, out: Output, rid: str, created: int) -> TokenFrame:
    """Pre-rendered bytes around a text token, so a token event costs one ``json.dumps(str)``.

    ``frame.event(piece)`` equals ``stream_token(...)`` for plain-text chat/completions outputs;
    ``None`` when the output needs the general path (``/generate``, tool calls).
    """
    if req.api == "generate" or out.tool_name is not None or req.logprobs is not None:
        return None
    probe = Output((_SENTINEL,), finish_reason=out.finish_reason)
    marker = json.dumps(_SENTINEL).encode()
    prefix, suffix = stream_token(req, item, probe, 0, rid, created).split(marker)
    return _Frame(prefix, suffix)


@dataclass(frozen=True)
class _Frame:
    prefix: bytes
    suffix: bytes

    def event(self, piece: str) -> bytes:
        return self.prefix + _json_str(piece) + self.suffix


@functools.lru_cache(maxsize=8192)
def _json_str(piece: str) -> bytes:
    """A piece as a JSON string (the output's pieces come from a small vocabulary: cached)."""
    return json.dumps(piece).encode()


TokenFrame = _Frame | None
