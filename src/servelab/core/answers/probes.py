"""The seeded probe set: greedy requests whose answers are checked inside a load (pure).

Three kinds, each a :class:`Probe` with its request body (:func:`probe_body`):

- **plain**: a short instruction over seeded words; its answer is judged against the
  reference answer of the baseline state;
- **tool**: the same with one tool whose parameters are a JSON schema; the answer's tool-call
  arguments must parse and satisfy the schema (:mod:`servelab.core.answers.schema`);
- **retrieval**: a long context of seeded filler with ``The pass key is NNNNNN.`` placed at a
  depth (0 to 1, the share of the context before it), asked ``What is the pass key?`` last: the
  answer is right when it holds the key (recall, the sparse-attention ``index_topk`` story).

Every probe is greedy (``temperature`` 0) with a fixed request ``seed``, streamed with usage and,
when asked, ``logprobs``/``top_logprobs``. Sizes are checked against the context length before
anything is sent (:func:`probe_set` raises ``ValueError``): a retrieval probe's context plus its
answer must fit. Lengths are counted in the simulator's word-level tokens (a word or a punctuation
mark); a real tokenizer gives about as many for these English words.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from enum import StrEnum
from typing import NotRequired, TypedDict

from servelab.core.answers.schema import JsonSchema

__all__ = [
    "PASS_KEY_QUESTION",
    "PROBE_SEED",
    "Probe",
    "ProbeBody",
    "ProbeKind",
    "probe_body",
    "probe_set",
    "retrieval_tokens",
]

#: The request ``seed`` every probe carries (greedy decoding needs none; an engine that samples
#: anyway is then still repeatable).
PROBE_SEED = 1234
PASS_KEY_QUESTION = "What is the pass key?"
#: Each kind's answer length (tokens): enough to tell answers apart, cheap beside the load's.
_MAX_TOKENS = {"plain": 24, "tool": 32, "retrieval": 12}
_TOP_LOGPROBS = 2

_WORDS = (
    "river",
    "stone",
    "garden",
    "window",
    "market",
    "letter",
    "engine",
    "bridge",
    "winter",
    "silver",
    "signal",
    "harbor",
    "lantern",
    "meadow",
    "anchor",
    "candle",
    "forest",
    "pocket",
    "ladder",
    "orbit",
    "mirror",
    "violet",
    "thunder",
    "copper",
    "island",
    "basket",
    "glacier",
    "rocket",
    "saddle",
    "tunnel",
    "velvet",
    "whistle",
    "canyon",
    "feather",
    "marble",
    "needle",
    "pepper",
    "quartz",
    "saffron",
    "timber",
    "walnut",
    "yellow",
    "zephyr",
)
_FILLER = (
    "The",
    "grass",
    "is",
    "green.",
    "The",
    "sky",
    "is",
    "blue.",
    "The",
    "sun",
    "is",
    "yellow.",
    "Here",
    "we",
    "go.",
    "There",
    "and",
    "back",
    "again.",
)
_TOOLS: tuple[tuple[str, str, dict[str, JsonSchema], list[str]], ...] = (
    ("get_weather", "Look up the weather of a city.",
     {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
     ["city"]),
    ("search_flights", "Find flights between two airports.",
     {"origin": {"type": "string"}, "destination": {"type": "string"},
      "passengers": {"type": "integer"}},
     ["origin", "destination"]),
    ("set_reminder", "Set a reminder.",
     {"text": {"type": "string"}, "minutes": {"type": "integer"}, "urgent": {"type": "boolean"}},
     ["text"]),
)  # fmt: skip


class _Message(TypedDict):
    role: str
    content: str


class _Function(TypedDict):
    name: str
    description: str
    parameters: JsonSchema


class _Tool(TypedDict):
    type: str
    function: _Function


class _StreamOptions(TypedDict):
    include_usage: bool


class ProbeBody(TypedDict):
    """A probe's chat-completions body as sent (OpenAI's fields, in this order)."""

    model: str
    messages: list[_Message]
    max_tokens: int
    temperature: float
    seed: int
    stream: bool
    stream_options: _StreamOptions
    tools: NotRequired[list[_Tool]]
    logprobs: NotRequired[bool]
    top_logprobs: NotRequired[int]


class ProbeKind(StrEnum):
    """What a probe checks."""

    PLAIN = "plain"
    TOOL = "tool"
    RETRIEVAL = "retrieval"


@dataclass(frozen=True)
class Probe:
    """One greedy request: its id in the set, kind, chat messages, tool (name, JSON schema) for
    a tool probe, answer length, and for a retrieval probe the key and its depth."""

    id: int
    kind: ProbeKind
    messages: tuple[tuple[str, str], ...]
    max_tokens: int
    tool: tuple[str, str, JsonSchema] | None = None
    key: str | None = None
    depth: float | None = None
    prompt_tokens: int = 0


def retrieval_tokens(context_len: int, max_tokens: int = _MAX_TOKENS["retrieval"]) -> int:
    """A retrieval probe's context: a fifth of the context length (punctuation adds tokens), at
    most 4096 tokens and at least 64 (``ValueError`` when it does not fit with its answer)."""
    size = min(4096, context_len // 5)
    if size < 64 or size + 64 + max_tokens > context_len:
        raise ValueError(f"a context of {context_len} tokens is too short for a retrieval probe")
    return size


def _plain(pid: int, rng: random.Random) -> Probe:
    words = " ".join(rng.choices(_WORDS, k=12))
    text = f"Write one sentence that uses these words: {words}."
    return Probe(pid, ProbeKind.PLAIN, (("user", text),), _MAX_TOKENS["plain"],
                 prompt_tokens=len(text.split()) + 2)  # fmt: skip


def _tool(pid: int, rng: random.Random) -> Probe:
    name, description, properties, required = _TOOLS[pid % len(_TOOLS)]
    schema: JsonSchema = {"type": "object", "properties": properties, "required": required,
                          "additionalProperties": False}  # fmt: skip
    ask = " ".join(rng.choices(_WORDS, k=6))
    text = f"Call {name} for this request: {ask}."
    return Probe(pid, ProbeKind.TOOL, (("user", text),), _MAX_TOKENS["tool"],
                 tool=(name, description, schema), prompt_tokens=len(text.split()) + 2)  # fmt: skip


def _retrieval(pid: int, rng: random.Random, context_len: int) -> Probe:
    size = retrieval_tokens(context_len)
    key = f"{rng.randrange(10**6):06d}"
    depth = round(rng.random(), 3)
    filler = [_FILLER[i % len(_FILLER)] for i in range(size)]
    at = int(depth * size)
    needle = f"The pass key is {key}."
    text = " ".join([*filler[:at], needle, *filler[at:]])
    context = f"Remember the pass key in this text. {text}"
    messages = (("system", context), ("user", PASS_KEY_QUESTION))
    return Probe(pid, ProbeKind.RETRIEVAL, messages, _MAX_TOKENS["retrieval"], key=key,
                 depth=depth, prompt_tokens=size + 16)  # fmt: skip


def probe_set(seed: int, n: int, context_len: int) -> tuple[Probe, ...]:
    """``n`` probes from ``seed``: kinds in turn (plain, tool, retrieval), each built from its
    own seeded stream (the same ``(seed, i)`` gives the same probe whatever ``n``)."""
    if n < 1:
        raise ValueError("a probe set needs at least one probe")
    kinds = (ProbeKind.PLAIN, ProbeKind.TOOL, ProbeKind.RETRIEVAL)
    out = []
    for i in range(n):
        rng = random.Random(f"servelab-probe:{seed}:{i}")
        kind = kinds[i % 3]
        if kind is ProbeKind.PLAIN:
            out.append(_plain(i, rng))
        elif kind is ProbeKind.TOOL:
            out.append(_tool(i, rng))
        else:
            out.append(_retrieval(i, rng, context_len))
    return tuple(out)


def probe_body(probe: Probe, model: str, *, logprobs: bool = True) -> bytes:
    """The chat-completions body of ``probe`` as sent (JSON bytes): greedy, seeded, streamed with
    usage."""
    body: ProbeBody = {
        "model": model,
        "messages": [{"role": role, "content": text} for role, text in probe.messages],
        "max_tokens": probe.max_tokens,
        "temperature": 0,
        "seed": PROBE_SEED,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if probe.tool is not None:
        name, description, schema = probe.tool
        body["tools"] = [{"type": "function",
                          "function": {"name": name, "description": description,
                                       "parameters": schema}}]  # fmt: skip
    if logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = _TOP_LOGPROBS
    return json.dumps(body).encode()
