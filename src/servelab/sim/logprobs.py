"""Log-probabilities in the OpenAI shapes SGLang and vLLM return them in.

PURE. Asked with ``logprobs: true`` and ``top_logprobs: k`` (chat) or ``logprobs: k``
(completions); the values come from :func:`servelab.sim.answers.top_alternatives`.

- Chat (SGLang ``protocol.py`` ``ChoiceLogprobs``/``ChatCompletionTokenLogprob``/``TopLogprob``;
  vLLM ``ChatCompletionLogProbs``): ``choice.logprobs = {"content": [{"token", "logprob",
  "bytes", "top_logprobs": [{"token", "logprob", "bytes"}, ...k]}]}``, in a stream each chunk
  with its own tokens.
- Completions (SGLang and vLLM ``LogProbs``): ``choice.logprobs = {"text_offset": [...],
  "token_logprobs": [...], "tokens": [...], "top_logprobs": [{token: logprob, ...k}, ...]}``.
"""

from __future__ import annotations

from typing import Any

from servelab.sim.answers import top_alternatives
from servelab.sim.text import Output

__all__ = ["MAX_LOGPROBS", "chat_logprobs", "completion_logprobs", "requested_logprobs"]

#: The most top log-probabilities a request may ask for (vLLM's default ``--max-logprobs``; the
#: OpenAI API's ``top_logprobs`` maximum).
MAX_LOGPROBS = 20


def _count(value: Any, name: str) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        return f"'{name}' must be an integer"
    if not 0 <= value <= MAX_LOGPROBS:
        return f"'{name}' must be within [0, {MAX_LOGPROBS}], got {value}"
    return value


def requested_logprobs(api: str, body: dict[str, Any]) -> int | str | None:
    """How many alternatives per token a request asks for (None: no log-probabilities), or why
    the request is refused. Chat: ``logprobs: true`` with ``top_logprobs: k`` (k alone is refused,
    in vLLM's words); completions: ``logprobs: k``; SGLang's ``/generate`` ones are not modelled."""
    if api == "completions":
        return _count(body.get("logprobs"), "logprobs")
    if api != "chat":
        return None
    asked, top = body.get("logprobs"), _count(body.get("top_logprobs"), "top_logprobs")
    if asked is not None and not isinstance(asked, bool):
        return "'logprobs' must be a boolean"
    if isinstance(top, str):
        return top
    if top is not None and not asked:
        return "when using `top_logprobs`, `logprobs` must be set to true."
    return (top or 0) if asked else None


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def chat_logprobs(out: Output, start: int, stop: int, top: int) -> dict[str, Any]:
    """Chat ``logprobs`` of tokens ``start`` to ``stop`` (exclusive), ``top`` alternatives each."""
    content = []
    for k in range(start, stop):
        alts = top_alternatives(out, k, max(top, 1))
        entry = _entry(out.pieces[k], alts[0][1])
        entry["top_logprobs"] = [_entry(t, lp) for t, lp in alts[:top]]
        content.append(entry)
    return {"content": content}


def completion_logprobs(out: Output, start: int, stop: int, top: int) -> dict[str, Any]:
    """Completions ``logprobs`` of tokens ``start`` to ``stop`` (``text_offset`` from the
    answer's start)."""
    offset = sum(len(p) for p in out.pieces[:start])
    data: dict[str, Any] = {"text_offset": [], "token_logprobs": [], "tokens": [],
                            "top_logprobs": []}  # fmt: skip
    for k in range(start, stop):
        alts = top_alternatives(out, k, max(top, 1))
        data["text_offset"].append(offset)
        data["token_logprobs"].append(alts[0][1])
        data["tokens"].append(out.pieces[k])
        data["top_logprobs"].append(dict(alts[:top]))
        offset += len(out.pieces[k])
    return data
