"""A stream's events. One output token's, the step loop's hot path: :func:`stream_token` renders
token ``k`` of an item for every API (the text so far on ``/generate``, a content or tool-call
delta on chat, a text piece on completions, with its log-probabilities when asked), and
:func:`token_frame` pre-renders the bytes around a plain-text token so an event costs one
``json.dumps(str)``. The stream's start, an item's finish and the usage (:func:`stream_start`,
:func:`stream_finish`, :func:`stream_usage`) are rendered as bytes around the envelope's head
too: the same bytes as ``sse(envelope(...))`` (``tests/sim/test_stream_events.py``), a few µs a
request less. A non-streamed body is :mod:`servelab.sim.protocol`'s."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servelab.sim.limits import CachedTokens
from servelab.sim.protocol import (
    Api,
    GenItem,
    GenRequest,
    add_logprobs,
    envelope,
    generate_meta,
    openai_usage,
    sse,
)
from servelab.sim.text import Output

__all__ = [
    "TokenFrame",
    "stream_finish",
    "stream_start",
    "stream_token",
    "stream_usage",
    "token_frame",
]

#: ``json.dumps(..., separators=(",", ":"))`` without building an encoder per call
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _head(req: GenRequest, rid: str, created: int) -> bytes:
    """``sse(envelope(req, rid, created, choices))`` up to ``choices``' value."""
    obj = b"chat.completion.chunk" if req.api == "chat" else b"text_completion"
    head = b'data: {"id":%b,"object":"%b","created":%d,' % (json.dumps(rid).encode(), obj, created)
    return head + b'"model":%b,"choices":' % json.dumps(req.model).encode()


def stream_start(req: GenRequest, item: GenItem, rid: str, created: int) -> bytes:
    """The first event of a chat stream (the assistant role); empty for other APIs."""
    if req.api != "chat":
        return b""
    choice = b'[{"index":%d,"delta":{"role":"assistant","content":""},"finish_reason":null}]}'
    return _head(req, rid, created) + choice % item.index + b"\n\n"


def stream_finish(
    req: GenRequest, item: GenItem, out: Output, n_out: int, rid: str, created: int
) -> bytes:
    """The event that closes ``item`` with its finish reason."""
    if req.api == "generate":
        text = "".join(out.pieces[:n_out])
        meta = generate_meta(item, rid, n_out, out.finish_reason)
        return sse({"text": text, "meta_info": meta, "index": item.index})
    value = b'"delta":{}' if req.api == "chat" else b'"text":""'
    finish = _COMPACT.encode(out.finish_reason).encode()
    choice = b'[{"index":%d,%b,"finish_reason":%b}]}' % (item.index, value, finish)
    return _head(req, rid, created) + choice + b"\n\n"


def stream_usage(
    req: GenRequest, n_outs: list[int], rid: str, created: int, *, cached: int = 0,
    report: CachedTokens = CachedTokens.OFF,
) -> bytes:  # fmt: skip
    """The final usage event (``stream_options.include_usage``), OpenAI APIs only."""
    if req.api == "generate" or not req.include_usage:
        return b""
    usage = _COMPACT.encode(openai_usage(req, n_outs, cached, report)).encode()
    return _head(req, rid, created) + b'[],"usage":' + usage + b"}\n\n"


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
_ID_HEAD = b'data: {"id":""'


def token_frame(req: GenRequest, item: GenItem, out: Output, rid: str, created: int) -> TokenFrame:
    """Pre-rendered bytes around a text token, so a token event costs one ``json.dumps(str)``.

    ``frame.event(piece)`` equals ``stream_token(...)`` for plain-text chat/completions outputs;
    ``None`` when the output needs the general path (``/generate``, tool calls). The bytes that
    do not depend on the request's id and time are rendered once per (API, model, index).
    """
    if req.api == "generate" or out.tool_name is not None or req.logprobs is not None:
        return None
    between, tail, suffix = _template(req.api, req.model, item.index)
    head = b"%b%b%b%d" % (_ID_HEAD[:-2], json.dumps(rid).encode(), between, created)
    return _Frame(head + tail, suffix)


@functools.lru_cache(maxsize=256)
def _template(api: Api, model: str, index: int) -> tuple[bytes, bytes, bytes]:
    """A text token's event rendered once with an empty id and ``created`` 0, cut into what
    lies between the id and ``created``'s value, what follows that value up to the piece, and
    what follows the piece: the envelope's keys come in the order id, object, created, model."""
    req = GenRequest(api, model, True, False, None, (), (), False)
    probe, item = Output((_SENTINEL,)), GenItem(index, "", 0, 1)
    prefix, suffix = stream_token(req, item, probe, 0, "", 0).split(json.dumps(_SENTINEL).encode())
    cut = prefix.index(b',"model":')
    head, tail = prefix[:cut], prefix[cut:]
    assert head.startswith(_ID_HEAD) and head.endswith(b'"created":0'), head
    return head[len(_ID_HEAD) : -1], tail, suffix


@dataclass(frozen=True)
class _Frame:
    prefix: bytes
    suffix: bytes

    def event(self, piece: str) -> bytes:
        return self.prefix + _json_str(piece) + self.suffix

    def chunks(self, pieces: Sequence[str], chunked: bool) -> list[bytes]:
        """The events of ``pieces``, each framed as one HTTP/1.1 chunk when ``chunked``."""
        prefix, suffix = self.prefix, self.suffix
        if not chunked:
            return [prefix + _json_str(p) + suffix for p in pieces]
        fixed = len(prefix) + len(suffix)  # one pass: each chunk built in one formatting
        return [
            b"%x\r\n%b%b%b\r\n" % (fixed + len(j), prefix, j, suffix)
            for j in map(_json_str, pieces)
        ]


@functools.lru_cache(maxsize=8192)
def _json_str(piece: str) -> bytes:
    """A piece as a JSON string (the output's pieces come from a small vocabulary: cached)."""
    return json.dumps(piece).encode()


TokenFrame = _Frame | None
