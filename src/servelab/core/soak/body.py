"""A chat-completions request body as the soak sends it (pure): :class:`ChatBody`.

The soak sends bodies of two shapes, each in its own key order: its agentic rounds and probes
(:mod:`servelab.core.soak.agentic`) and, when a wrong answer is localized, an answer probe's body
(:func:`servelab.core.answers.probes.probe_body`). The replay matrix changes them (streamed or
not, a marker against the prefix cache, the prompt or the answer's length varied, the
conversation shrunk, the PD hand-off's fields added), and every byte it sends must be what the
same change to the body as a JSON object gives: a key changed stays where it was, a key added
goes last. So the body is kept here as its ordered JSON object, which no other module sees:
the soak builds one with :meth:`ChatBody.of` (keys in the order given), changes it through the
methods below (each returns a new body), and the HTTP client gets :meth:`ChatBody.encoded`, the
bytes, once per send; :attr:`ChatBody.size` is their length (a cell's ``payload_bytes``, a
failure's payload size).
"""

from __future__ import annotations

import json
from typing import Unpack

from servelab.core.load.chat import ChatFields, ChatRequest, KvTransferParams
from servelab.core.soak.clock import expected_tokens

__all__ = ["ChatBody"]


class ChatBody:
    """One chat-completions request body, immutable: its JSON object, in its key order."""

    __slots__ = ("_doc", "_raw")

    def __init__(self) -> None:
        self._doc: ChatRequest = {"model": "", "messages": []}
        self._raw: bytes | None = None

    @classmethod
    def of(cls, **fields: Unpack[ChatRequest]) -> ChatBody:
        """A body of ``fields``, in the order given (``model=..., messages=[...], ...``)."""
        return _wrap(fields)

    @classmethod
    def decoded(cls, raw: bytes) -> ChatBody:
        """A body sent as ``raw`` (JSON bytes of an object; anything else is a ValueError)."""
        doc: ChatRequest = json.loads(raw)  # servelab's own body, sent before: read back as one
        if not isinstance(doc, dict):
            raise ValueError("a chat request body is a JSON object")
        return _wrap(doc)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatBody) and self._doc == other._doc

    __hash__ = None  # type: ignore[assignment]  # mutable inside, compared by value

    def __repr__(self) -> str:
        return f"ChatBody({self.size} bytes)"

    def encoded(self) -> bytes:
        """The bytes sent: the object as ``json.dumps`` writes it, UTF-8."""
        if self._raw is None:
            self._raw = json.dumps(self._doc).encode()
        return self._raw

    @property
    def size(self) -> int:
        """Bytes of the body as sent."""
        return len(self.encoded())

    @property
    def stream(self) -> bool:
        """The answer is streamed."""
        return bool(self._doc.get("stream"))

    @property
    def expected_tokens(self) -> int | None:
        """The longest answer it may get (:func:`~servelab.core.soak.clock.expected_tokens`)."""
        return expected_tokens(self._doc)

    def with_fields(self, **fields: Unpack[ChatFields]) -> ChatBody:
        """``fields`` set: a key the body has keeps its place, a new one goes last."""
        out: ChatRequest = {**self._doc, **fields}
        return _wrap(out)

    def streamed(self, stream: bool) -> ChatBody:
        """Streamed or not; not streamed, without ``stream_options`` (a streamed body keeps
        whatever it had)."""
        out: ChatRequest = {**self._doc, "stream": stream}
        if not stream:
            out.pop("stream_options", None)
        return _wrap(out)

    def uncached(self, marker: str) -> ChatBody:
        """The last message's text opened by ``marker`` (a text part first, when its content is
        a list of parts); a body whose last message has no text is left as it is."""
        messages = self._doc.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
            return self
        last = messages[-1].copy()
        content = last.get("content")
        if isinstance(content, str):
            last["content"] = marker + content
        elif isinstance(content, list):
            last["content"] = [{"type": "text", "text": marker}, *content]
        else:
            return self
        return _wrap({**self._doc, "messages": [*messages[:-1], last]})

    def prompt_of(self, other: ChatBody) -> ChatBody:
        """This body with ``other``'s messages and no tools (the answer's length kept)."""
        small = self._doc.copy()
        small.pop("tools", None)  # the tools are part of the prompt
        small.pop("tool_choice", None)
        small["messages"] = list(other._doc["messages"])
        return _wrap(small)

    def prefill_leg(self, remote: KvTransferParams) -> ChatBody:
        """vllm-router's prefill leg of this body: one token, not streamed, with
        ``kv_transfer_params`` ``remote`` (asking for a remote decode)."""
        leg: ChatRequest = {**self._doc, "max_tokens": 1, "min_tokens": 1, "stream": False,
                            "kv_transfer_params": remote.copy()}  # fmt: skip
        leg.pop("stream_options", None)
        if "max_completion_tokens" in leg:
            leg["max_completion_tokens"] = 1
        return _wrap(leg)

    def shrunk(self, limit: int) -> ChatBody:
        """Cut down to about ``limit`` bytes: the oldest turns dropped (system and tools kept,
        no tool result left without its call), then the last turn's text truncated."""
        messages = [m.copy() for m in self._doc.get("messages", [])]
        system = [m for m in messages if m.get("role") == "system"]
        turns = [m for m in messages if m.get("role") != "system"]
        out = self._doc.copy()
        while len(turns) > 1 and _size({**out, "messages": system + turns}) > limit:
            turns.pop(0)
            while len(turns) > 1 and turns[0].get("role") in ("tool", "assistant"):
                turns.pop(0)
        out["messages"] = system + turns
        last = turns[-1] if turns else None
        text = None if last is None else last.get("content")
        if last is not None and isinstance(text, str):
            excess = _size(out) - limit
            if excess > 0:
                last["content"] = text[: max(1, len(text) - excess)]
        return _wrap(out)


def _wrap(doc: ChatRequest) -> ChatBody:
    body = ChatBody()
    body._doc = doc.copy()
    return body


def _size(doc: ChatRequest) -> int:
    return len(json.dumps(doc).encode())
