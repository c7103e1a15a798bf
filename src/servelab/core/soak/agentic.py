"""Multi-round agentic conversations (pure): the soak's workload and its correctness checks.

An agent session is a chat conversation that grows every round: each request carries the whole
conversation so far plus the tool definitions; tool calls in an answer get synthetic tool results in
the next round, otherwise the next user turn is appended. Everything is derived from an ``int`` seed
and the session index, so ``--seed 0`` replays the same traffic.

:class:`AnswerAssembler` is sans-I/O: feed it the decoded SSE events of a streamed chat completion
and it reassembles the text and the tool calls (``arguments`` arrive in fragments, keyed by index).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

from servelab.core.load.chat import ChatChoice, ChatMessage, ChatTool, ChunkToolCall, chunk_of
from servelab.core.load.sse import Event
from servelab.core.load.workload import make_prompt
from servelab.core.soak.body import ChatBody
from servelab.core.soak.fresh import FreshContext

__all__ = [
    "TOOLS",
    "Answer",
    "AnswerAssembler",
    "Conversation",
    "Message",
    "ToolCall",
    "Violation",
    "check_answer",
    "compare_texts",
    "e2e_probe_body",
    "greedy_probe_body",
    "tool_result",
]

#: Tool definitions sent with every agentic request (OpenAI "function" tools).
TOOLS: tuple[ChatTool, ...] = (
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository and return its text.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command in the sandbox and return its output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_s": {"type": "integer"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_code",
            "description": "Search the repository for a pattern.",
            "parameters": {
                "type": "object",
                "properties": {"pattern": {"type": "string"}},
                "required": ["pattern"],
            },
        },
    },
)

_SYSTEM = (
    "You are a coding agent. Use the tools to inspect the repository, then answer precisely. "
    "Call tools with JSON arguments."
)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an answer; ``arguments`` is the raw string the model produced."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation: its role and text; an assistant's tool calls; a tool
    result's call id."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


def _sent(message: Message) -> ChatMessage:
    """``message`` as the request carries it: ``role``, a tool result's ``tool_call_id``,
    ``content``, an assistant's ``tool_calls`` (OpenAI's function calls), in that order."""
    doc: ChatMessage
    if message.tool_call_id is not None:
        doc = {"role": message.role, "tool_call_id": message.tool_call_id,
               "content": message.content}  # fmt: skip
    else:
        doc = {"role": message.role, "content": message.content}
    if message.tool_calls:
        doc["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return doc


@dataclass(frozen=True, slots=True)
class Answer:
    """A reassembled assistant answer."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    """A correctness violation: ``kind`` is ``"tool_call_json"`` or ``"nondeterministic"``."""

    kind: str
    detail: str


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class AnswerAssembler:
    """Reassemble a streamed chat completion (sans-I/O: decoded SSE events in)."""

    __slots__ = ("_calls", "_finish", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._finish: str | None = None

    def on_events(self, events: list[Event]) -> None:
        """Interpret each event of one read."""
        for event in events:
            self.on_event(event)

    def on_event(self, event: Event) -> None:
        """Pick up content and tool-call fragments; anything unparsable is ignored here
        (the request record reports malformed streams)."""
        if event.data == "[DONE]":
            return
        try:
            chunk = chunk_of(json.loads(event.data))
        except ValueError:
            return
        if chunk is None:
            return
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                self._on_choice(choice)

    def _on_choice(self, choice: ChatChoice) -> None:
        if isinstance(choice.get("finish_reason"), str):
            self._finish = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            message = choice.get("message")  # a non-streamed answer
            delta = message if isinstance(message, dict) else {}
        content = delta.get("content")
        if isinstance(content, str):
            self._text.append(content)
        for raw in delta.get("tool_calls") or []:
            if isinstance(raw, dict):
                self._on_call(raw)

    def _on_call(self, raw: ChunkToolCall) -> None:
        index = raw.get("index", len(self._calls))
        part = self._calls.setdefault(index if isinstance(index, int) else 0, _PartialCall())
        if isinstance(raw.get("id"), str) and raw["id"]:
            part.id = raw["id"]
        function = raw.get("function")
        if isinstance(function, dict):
            if isinstance(function.get("name"), str) and function["name"]:
                part.name = function["name"]
            if isinstance(function.get("arguments"), str):
                part.arguments.append(function["arguments"])

    def answer(self) -> Answer:
        """The answer assembled so far."""
        calls = tuple(
            ToolCall(i, p.id or f"call_{i}", p.name, "".join(p.arguments))
            for i, p in sorted(self._calls.items())
        )
        return Answer("".join(self._text), calls, self._finish)


def check_answer(answer: Answer) -> list[Violation]:
    """Every tool call's arguments must parse as a JSON object."""
    violations = []
    for call in answer.tool_calls:
        try:
            parsed = json.loads(call.arguments)
        except ValueError as exc:
            violations.append(
                Violation("tool_call_json", f"{call.name}: {exc}: {call.arguments!r}")
            )
            continue
        if not isinstance(parsed, dict):
            violations.append(
                Violation("tool_call_json", f"{call.name}: not an object: {call.arguments!r}")
            )
    return violations


def compare_texts(reference: str, under_load: str) -> Violation | None:
    """The same greedy request must give the same text at concurrency 1 and under load."""
    if reference == under_load:
        return None
    at = next(
        (i for i, (a, b) in enumerate(zip(reference, under_load, strict=False)) if a != b),
        min(len(reference), len(under_load)),
    )
    return Violation(
        "nondeterministic",
        f"differs at char {at}: C1 {reference[at : at + 40]!r}"
        f" vs load {under_load[at : at + 40]!r}",
    )


def tool_result(call: ToolCall, *, seed: int, words: int) -> str:
    """A deterministic synthetic result for ``call`` (``words`` words, derived from its args)."""
    digest = hashlib.sha256(f"{seed}:{call.name}:{call.arguments}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return f"[{call.name} ok] " + make_prompt(max(words, 1), rng)


class Conversation:
    """One agent session's growing conversation (deterministic for ``seed`` and ``session``)."""

    __slots__ = ("_rng", "_seed", "fresh", "messages", "round", "session", "turn_words")

    def __init__(
        self, session: int, *, seed: int, turn_words: int = 48, fresh: FreshContext | None = None
    ) -> None:
        if turn_words < 1:
            raise ValueError(f"turn_words must be ≥ 1, got {turn_words}")
        self.session = session
        self._seed = seed
        self.fresh = fresh
        self._rng = random.Random(seed * 1_000_003 + session)
        self.turn_words = turn_words
        self.round = 0
        self.messages: list[Message] = [
            Message("system", _SYSTEM),
            Message("user", self._user_turn()),
        ]

    def words(self) -> int:
        """The words this round's new turn adds: ``turn_words``, or the fresh-context mix's."""
        if self.fresh is None:
            return self.turn_words
        return self.fresh.words(self._seed, self.session, self.round)

    def _user_turn(self) -> str:
        task = make_prompt(self.words(), self._rng)
        return f"Session {self.session}, task {self.round}: {task}"

    def request_body(self, *, model: str, max_tokens: int) -> ChatBody:
        """The next request: the whole conversation, the tools, greedy, streamed with usage."""
        return ChatBody.of(
            model=model,
            messages=[_sent(m) for m in self.messages],
            tools=[t.copy() for t in TOOLS],
            tool_choice="auto",
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )

    def add_answer(self, answer: Answer) -> None:
        """Append the answer, then tool results for its calls, or else the next user turn."""
        self.messages.append(Message("assistant", answer.text, answer.tool_calls))
        self.round += 1
        if answer.tool_calls:
            for call in answer.tool_calls:
                content = tool_result(call, seed=self._seed, words=self.words())
                self.messages.append(Message("tool", content, tool_call_id=call.id))
        else:
            self.messages.append(Message("user", self._user_turn()))


def greedy_probe_body(*, model: str, max_tokens: int, seed: int) -> ChatBody:
    """A fixed greedy request (same every time for ``seed``) for the determinism check."""
    rng = random.Random(seed ^ 0x5EED)
    prompt = "Determinism probe: " + make_prompt(32, rng)
    return ChatBody.of(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )


def e2e_probe_body(*, model: str) -> ChatBody:
    """A tiny streamed request: does a completion get through at all?"""
    return ChatBody.of(
        model=model,
        messages=[{"role": "user", "content": "servelab soak e2e probe"}],
        max_tokens=4,
        temperature=0,
        stream=True,
    )
