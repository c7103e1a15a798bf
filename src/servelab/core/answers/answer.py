"""One probe's answer read from its streamed body, and the checks made on it (pure).

:func:`read_answer` is sans-I/O: the raw bytes of an OpenAI-compatible chat stream in, an
:class:`Answer` out (the content, a tool call's name and arguments, the finish reason, the
``usage`` count, each token's top-1 log-probability token when the engine returned
``logprobs``, and whether every byte was valid UTF-8). :func:`check_answer` compares it with its
probe and the reference answer of the baseline state:

- **differs**: the text (or the tool call: name and arguments) is not the reference's;
- **structural failures** (:class:`Failure`): the request failed, an empty answer, invalid UTF-8
  (bytes that do not decode, or U+FFFD in the text), a tool call's arguments that do not parse
  as a JSON object or break the probe's schema, a finish reason missing or disagreeing with the
  length (``length`` below ``max_tokens``; ``stop``/``tool_calls`` beyond it);
- **recalled** (retrieval probes): the answer holds the pass key;
- **top-1 agreement**: the share of positions whose top-1 token is the reference's (both with
  log-probabilities; None otherwise).

A probe's answer is **wrong** when it has a structural failure, when a retrieval probe does not
recall its key (it has a truth of its own), or when another probe's answer differs from the
reference. Wrong is what the rule (:mod:`servelab.core.answers.rule`) compares between arms.

A probe **cut** by the run's end (``--deadline``, a stop: :attr:`Answer.cut`) is never judged:
its check is marked :attr:`AnswerCheck.cut`, neither wrong nor right, and it is counted apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from typing_extensions import TypedDict  # pydantic reads it on Python 3.11 (its dependency)

from servelab.core.answers.probes import Probe, ProbeKind
from servelab.core.answers.schema import JsonSchema, schema_errors
from servelab.core.ledger.codec import decode
from servelab.core.load.sse import SSEDecoder
from servelab.errors import RecordError

__all__ = ["TEXT_MAX", "Answer", "AnswerCheck", "Failure", "check_answer", "read_answer"]

#: The most characters of a differing answer kept beside its reference.
TEXT_MAX = 200


class Failure(StrEnum):
    """A structural failure of one answer (what the ledger stores)."""

    REQUEST = "request-failed"
    EMPTY = "empty"
    UTF8 = "invalid-utf8"
    TOOL_JSON = "tool-args-not-json"
    TOOL_SCHEMA = "tool-args-break-schema"
    FINISH = "finish-reason-disagrees"


@dataclass(frozen=True)
class Answer:
    """What a probe was answered: ``text`` (a tool call's arguments for a tool call),
    ``tool_name`` (None: no tool call), ``finish_reason``, ``tokens`` (usage's count, else the
    chunks'), each position's top-1 token (empty: no log-probabilities), ``utf8`` (every byte
    valid), ``error`` (the request failed: why), ``cut`` (the request was cut by the run's end,
    a ``--deadline`` or a stop: not failed, never judged)."""

    probe: int
    text: str
    tool_name: str | None = None
    finish_reason: str | None = None
    tokens: int = 0
    top1: tuple[str, ...] = ()
    utf8: bool = True
    error: str | None = None
    #: The concurrency it was answered at (0: a reference's).
    level: int = 0
    cut: bool = False


@dataclass(frozen=True)
class AnswerCheck:
    """One answer against its probe and reference (see the module's docstring)."""

    probe: int
    kind: ProbeKind
    differs: bool
    failures: tuple[Failure, ...]
    recalled: bool | None
    top1_agree: float | None
    #: The concurrency the answer was given at (0: a reference's), and the answer's text when it
    #: differs from the reference (at most :data:`TEXT_MAX` characters; shown beside it).
    level: int = 0
    text: str = ""
    #: Cut by the run's end: not judged (never wrong, never right; counted apart).
    cut: bool = False

    @property
    def wrong(self) -> bool:
        """A structural failure, a retrieval probe not recalled, or another probe differing
        (never a cut one: it is not judged)."""
        if self.cut:
            return False
        if self.failures:
            return True
        if self.kind is ProbeKind.RETRIEVAL:
            return not self.recalled
        return self.differs


class _TopLogprob(TypedDict, total=False):
    token: str | None
    logprob: float | None


class _Position(TypedDict, total=False):
    token: str | None
    top_logprobs: list[_TopLogprob] | None


class _Logprobs(TypedDict, total=False):
    content: list[_Position] | None


class _Function(TypedDict, total=False):
    name: str | None
    arguments: str | None


class _Call(TypedDict, total=False):
    function: _Function | None


class _Delta(TypedDict, total=False):
    content: str | None
    tool_calls: list[_Call] | None


class _Choice(TypedDict, total=False):
    delta: _Delta | None
    finish_reason: str | None
    logprobs: _Logprobs | None


class _Usage(TypedDict, total=False):
    completion_tokens: int | None


class _Chunk(TypedDict, total=False):
    """The fields of a streamed chat-completions chunk an answer is read from (OpenAI's; what
    SGLang and vLLM send), each checked once by the codec as the chunk is read: a field of the
    wrong shape makes the stream malformed."""

    usage: _Usage | None
    choices: list[_Choice] | None


class _Reader:
    """The parts of a chat stream an answer is made of, fed one event's data at a time."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tool_name: str | None = None
        self.finish: str | None = None
        self.tokens = 0
        self.chunks = 0
        self.top1: list[str] = []
        self.error: str | None = None

    def feed(self, data: str) -> None:
        if data == "[DONE]":
            return
        try:
            raw = json.loads(data)
        except ValueError:
            self.error = self.error or "malformed stream"
            return
        if not isinstance(raw, dict) or "error" in raw or raw.get("object") == "error":
            self.error = self.error or "error in stream"
            return
        try:
            chunk = decode(_Chunk, raw)
        except RecordError:
            self.error = self.error or "malformed stream"
            return
        tokens = (chunk.get("usage") or {}).get("completion_tokens")
        if tokens is not None:
            self.tokens = tokens
        for choice in chunk.get("choices") or []:
            self._choice(choice)

    def _choice(self, choice: _Choice) -> None:
        delta = choice.get("delta") or {}
        content = delta.get("content")
        if content:
            self.text.append(content)
            self.chunks += 1
        for call in delta.get("tool_calls") or []:
            fn = call.get("function")
            if fn is not None:
                self.tool_name = fn.get("name") or self.tool_name
                arguments = fn.get("arguments")
                if arguments is not None:
                    self.text.append(arguments)
                    self.chunks += 1
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finish = finish
        logprobs = choice.get("logprobs") or {}
        for item in logprobs.get("content") or []:
            self.top1.append(_top1(item))


def _top1(item: _Position) -> str:
    """A position's most likely token: the first of its ``top_logprobs`` by log-probability,
    else the token chosen."""
    top = item.get("top_logprobs") or []
    if top:
        return max(top, key=_logprob).get("token") or ""
    return item.get("token") or ""


def _logprob(item: _TopLogprob) -> float:
    value = item.get("logprob")
    return float("-inf") if value is None else value


def read_answer(probe: int, body: bytes, error: str | None = None, level: int = 0) -> Answer:
    """The answer to probe ``probe`` in ``body``, a chat stream's raw bytes (``error``: the
    request's failure as the client recorded it)."""
    try:
        body.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    decoder = SSEDecoder()
    reader = _Reader()
    for event in [*decoder.feed(body, 0), *decoder.flush(0)]:
        reader.feed(event.data)
    return Answer(probe, "".join(reader.text), reader.tool_name, reader.finish,
                  reader.tokens or reader.chunks, tuple(reader.top1), utf8,
                  error or reader.error, level)  # fmt: skip


def _failures(probe: Probe, answer: Answer) -> list[Failure]:
    if answer.error is not None:
        return [Failure.REQUEST]
    out = []
    if not answer.text.strip():
        out.append(Failure.EMPTY)
    if not answer.utf8 or "\ufffd" in answer.text:
        out.append(Failure.UTF8)
    if answer.tool_name is not None and probe.tool is not None:
        out += _tool_failures(answer.text, probe.tool[2])
    finish, n = answer.finish_reason, answer.tokens
    if (
        finish is None
        or (finish == "length" and n < probe.max_tokens)
        or (finish in ("stop", "tool_calls") and n > probe.max_tokens)
    ):
        out.append(Failure.FINISH)
    return out


def _tool_failures(arguments: str, schema: JsonSchema) -> list[Failure]:
    try:
        value = json.loads(arguments)
    except ValueError:
        return [Failure.TOOL_JSON]
    if not isinstance(value, dict):
        return [Failure.TOOL_JSON]
    return [Failure.TOOL_SCHEMA] if schema_errors(value, schema) else []


def _agreement(answer: Answer, reference: Answer | None) -> float | None:
    if reference is None or not answer.top1 or not reference.top1:
        return None
    n = min(len(answer.top1), len(reference.top1))
    same = sum(a == b for a, b in zip(answer.top1[:n], reference.top1[:n], strict=True))
    return same / max(len(answer.top1), len(reference.top1))


def check_answer(probe: Probe, answer: Answer, reference: Answer | None) -> AnswerCheck:
    """``answer`` to ``probe`` against ``reference`` (None: no reference; it differs only when
    it failed). A cut answer is not judged: its check is marked cut and holds nothing else."""
    if answer.cut:
        return AnswerCheck(probe.id, probe.kind, False, (), None, None, answer.level, cut=True)
    failures = tuple(_failures(probe, answer))
    differs = bool(failures) if reference is None else (
        (answer.text, answer.tool_name) != (reference.text, reference.tool_name)
    )  # fmt: skip
    recalled = None
    if probe.kind is ProbeKind.RETRIEVAL and probe.key is not None:
        recalled = answer.error is None and probe.key in answer.text
    text = answer.text[:TEXT_MAX] if differs or failures or recalled is False else ""
    return AnswerCheck(probe.id, probe.kind, differs, failures, recalled,
                       _agreement(answer, reference), answer.level, text)  # fmt: skip
