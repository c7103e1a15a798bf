"""The OpenAI chat-completions JSON servelab sends and reads (pure): each a ``TypedDict``.

What is sent: a request body (:class:`ChatRequest`) with its messages (:class:`ChatMessage`) and
tools (:class:`ChatTool`), kept in its key order by :class:`~servelab.core.soak.body.ChatBody`.
What is read: one streamed event's JSON (:class:`ChatChunk`: its choices' deltas, its usage, an
in-band error), or a non-streamed answer's choices (``message`` in place of ``delta``). Only the
fields servelab reads or writes are named; a key not named is carried as it came.

An engine's answer is not trusted to fit: :func:`chunk_of` takes any decoded JSON and gives a
chunk only for a JSON object, and every reader of a field checks its value's type where it
reads it (a ``content`` that is a number, a ``choices`` that is a string, are no text, not a
crash) — the types here say what the API sends, the readers what a broken engine may.
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict, cast

__all__ = [
    "ArgumentSchema",
    "ChatChoice",
    "ChatChunk",
    "ChatDelta",
    "ChatFields",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatUsage",
    "ChunkError",
    "ChunkFunction",
    "ChunkToolCall",
    "FunctionCall",
    "KvTransferParams",
    "PromptTokensDetails",
    "StreamOptions",
    "TextPart",
    "ToolCall",
    "ToolFunction",
    "ToolParameters",
    "chunk_of",
]


# -- sent -----------------------------------------------------------------------------------
class FunctionCall(TypedDict):
    """An assistant message's function call: its name and its arguments' JSON text."""

    name: str
    arguments: str


class ToolCall(TypedDict):
    """An assistant message's tool call, as sent back in the conversation."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class TextPart(TypedDict):
    """One part of a message whose content is a list of parts."""

    type: Literal["text"]
    text: str


class ChatMessage(TypedDict):
    """One message of a request: a tool result names its call; an assistant's lists its calls."""

    role: str
    tool_call_id: NotRequired[str]
    content: str | list[TextPart]
    tool_calls: NotRequired[list[ToolCall]]


class ArgumentSchema(TypedDict):
    """The JSON Schema of one argument of a tool."""

    type: str


class ToolParameters(TypedDict):
    """A tool's arguments, as a JSON Schema object."""

    type: Literal["object"]
    properties: dict[str, ArgumentSchema]
    required: list[str]


class ToolFunction(TypedDict):
    """What a tool is: its name, what it does, its arguments."""

    name: str
    description: str
    parameters: ToolParameters


class ChatTool(TypedDict):
    """One tool of a request (an OpenAI "function" tool)."""

    type: Literal["function"]
    function: ToolFunction


class StreamOptions(TypedDict):
    """``stream_options``: a last chunk with the usage."""

    include_usage: bool


class KvTransferParams(TypedDict, total=False):
    """vLLM's NIXL hand-off (``kv_transfer_params``): what the prefill leg asks for, what its
    answer gives the decode leg (the remote engine and its blocks)."""

    do_remote_decode: bool
    do_remote_prefill: bool
    remote_engine_id: str | None
    remote_block_ids: list[int] | None
    remote_host: str | None
    remote_port: int | None
    tp_size: int


class ChatFields(TypedDict, total=False):
    """The fields of a request body other than its model and messages (SGLang's PD hand-off
    adds the ``bootstrap_*`` fields, vLLM's ``kv_transfer_params`` and ``min_tokens``)."""

    tools: list[ChatTool]
    tool_choice: str
    max_tokens: int
    max_completion_tokens: int
    min_tokens: int
    temperature: float
    stream: bool
    stream_options: StreamOptions
    kv_transfer_params: KvTransferParams
    bootstrap_host: str | None
    bootstrap_port: int | None
    bootstrap_room: int


class ChatRequest(ChatFields, total=False):
    """A chat-completions request body: its model, its messages and :class:`ChatFields`."""

    model: Required[str]
    messages: Required[list[ChatMessage]]


# -- read -----------------------------------------------------------------------------------
class ChunkFunction(TypedDict, total=False):
    """A fragment of a tool call's function: its name once, its arguments in pieces."""

    name: str
    arguments: str


class ChunkToolCall(TypedDict, total=False):
    """A fragment of a tool call in a delta, keyed by its ``index``."""

    index: int
    id: str
    type: str
    function: ChunkFunction


class ChatDelta(TypedDict, total=False):
    """What one chunk adds to a choice (or a non-streamed answer's whole ``message``)."""

    role: str | None
    content: str | None
    reasoning_content: str | None
    tool_calls: list[ChunkToolCall] | None


class ChatChoice(TypedDict, total=False):
    """One choice of a chunk: a chat ``delta`` (or ``message``), a completion's ``text``."""

    index: int
    delta: ChatDelta
    message: ChatDelta
    text: str
    finish_reason: str | None


class PromptTokensDetails(TypedDict, total=False):
    """``usage.prompt_tokens_details``: the prompt tokens served from the prefix cache."""

    cached_tokens: int


class ChatUsage(TypedDict, total=False):
    """A chunk's ``usage`` (the last one's, with ``stream_options.include_usage``)."""

    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_details: PromptTokensDetails | None


class ChunkError(TypedDict, total=False):
    """An in-band error (an ``error`` object, or a chunk whose ``object`` is ``"error"``)."""

    message: str
    code: int | str


class ChatChunk(TypedDict, total=False):
    """One streamed event's JSON (or a non-streamed answer)."""

    id: str
    object: str
    model: str
    choices: list[ChatChoice] | None
    usage: ChatUsage | None
    error: ChunkError


def chunk_of(value: object) -> ChatChunk | None:
    """``value`` (decoded JSON) as a chunk when it is a JSON object, else None (the module
    docstring: each field's reader checks its value)."""
    return cast("ChatChunk", value) if isinstance(value, dict) else None
