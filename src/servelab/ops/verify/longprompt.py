"""The e2e layer's long prompt: the engines' own input limits read, then ONE long prompt through
the entry point (:mod:`servelab.core.verify.longprompt` sizes it and says why it was skipped).

Each prefill's and decode's limit is read once: SGLang ``/server_info`` (else its
``/get_server_info`` alias) ``max_req_input_len``; vLLM ``/v1/models`` ``max_model_len`` less the
probe's output tokens. A worker that does not say is recorded as not said (``tokens`` None).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from servelab.core.verify.e2e import RequestTiming
from servelab.core.verify.longprompt import EngineLimit, LongProbe, LongSkip, long_prompt_size
from servelab.errors import ServelabError
from servelab.io.http.client import HttpClient
from servelab.ops.arguments import engine_report
from servelab.ops.context import Operation

__all__ = ["engine_limits", "long_probe", "long_prompt"]

#: Common English words, one token each in the usual BPE vocabularies (a real tokenizer counts
#: about one token per word; the simulator's counts exactly one).
_WORDS = ("the", "page", "cache", "token", "time", "model", "text", "data", "word", "line")


def long_prompt(tokens: int) -> str:
    """A prompt of about ``tokens`` tokens that starts with a fresh salt (no prefix cache can
    shorten its prefill or its transfer)."""
    body = " ".join(_WORDS[i % len(_WORDS)] for i in range(max(tokens - 16, 1)))
    return f"servelab long probe {secrets.token_hex(4)}: repeat the last word. {body}"


def _positive(value: object) -> int | None:
    return value if type(value) is int and value > 0 else None


async def _sglang_limit(op: Operation, service: str) -> EngineLimit:
    try:
        report = await engine_report(op, service)
    except ServelabError:
        report = None
    tokens = None if report is None else _positive(report.doc.get("max_req_input_len"))
    return EngineLimit(service, "max_req_input_len", tokens)


async def _vllm_limit(op: Operation, service: str, max_tokens: int) -> EngineLimit:
    try:
        base = await op.url(service)
    except ServelabError:
        return EngineLimit(service, "max_model_len", None)
    async with HttpClient(limit=1) as http:
        context = (await http.model_list(base, 5.0)).context_length
    return EngineLimit(service, "max_model_len", None if context is None else context - max_tokens)


async def engine_limits(op: Operation, max_tokens: int) -> tuple[EngineLimit, ...]:
    """Every prefill's and decode's longest input, as it says it (``tokens`` None: not said)."""
    names = [*op.spec.by_role("prefill"), *op.spec.by_role("decode")]
    if op.spec.engine == "vllm":
        return tuple([await _vllm_limit(op, name, max_tokens) for name in names])
    return tuple([await _sglang_limit(op, name) for name in names])


async def long_probe(
    limits: tuple[EngineLimit, ...],
    shorter_than: int,
    send: Callable[[str], Awaitable[RequestTiming]],
) -> LongProbe:
    """The long prompt sized from ``limits`` and sent by ``send`` (skipped, and why, when the
    limits leave none longer than ``shorter_than`` tokens)."""
    size = long_prompt_size(limits, shorter_than)
    if isinstance(size, LongSkip):
        return LongProbe(None, limits, skipped=size)
    got = await send(long_prompt(size))
    return LongProbe(
        size, limits, None, got.status, got.ttft_s, got.total_s, got.prompt_tokens,
        got.completion_tokens, got.error, got.error_detail,
    )  # fmt: skip
