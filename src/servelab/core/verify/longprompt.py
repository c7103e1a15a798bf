"""The e2e layer's long prompt (pure): sized from the engines' own input limits, capped.

A KV transfer can fail only for long prompts (transfer buffers sized below the longest prompt the
engine admits): the e2e probe's short prompt never finds it. So the e2e check also sends ONE long
prompt through the entry point, as long as the engines say they admit, at most
:data:`LONG_PROMPT_CAP` tokens:

- SGLang: ``/server_info``'s ``max_req_input_len`` (the scheduler's longest input);
- vLLM: ``/v1/models``' ``max_model_len`` minus the probe's output tokens;
- the smallest of every prefill's and decode's that could be read, minus
  :data:`TEMPLATE_HEADROOM` tokens for the chat template and the probe's own words.

No limit read: the long prompt is skipped, and its data says so (never silently). Its request's
timing is inside the e2e check's data (:class:`~servelab.core.verify.e2e.E2EProbe` ``long``); the
words are :mod:`servelab.report.e2e`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.ledger.codec import Omitted

__all__ = [
    "LONG_PROMPT_CAP",
    "TEMPLATE_HEADROOM",
    "EngineLimit",
    "LongProbe",
    "LongSkip",
    "long_prompt_size",
]

#: The long prompt's size at most, in tokens (docs/verify.md says it).
LONG_PROMPT_CAP = 8192
#: Tokens left under the engines' limit for the chat template and the prompt's own header.
TEMPLATE_HEADROOM = 64


class LongSkip(StrEnum):
    """Why no long prompt was sent (stored: values unchanged)."""

    NO_LIMIT = "no_limit"  # no prefill or decode said its input limit
    NOT_LONGER = "not_longer"  # the limit leaves no prompt longer than the first probe's


@dataclass(frozen=True)
class EngineLimit:
    """One worker's longest input, read from ``field`` (``max_req_input_len``, or
    ``max_model_len`` less the output tokens); ``tokens`` None: it did not say."""

    service: str
    field: str
    tokens: int | None


@dataclass(frozen=True)
class LongProbe:
    """The long prompt: the size asked for (None: skipped), the limits it was sized from, and
    its request's status and timings (the fields of
    :class:`~servelab.core.verify.e2e.RequestTiming`), or why it was skipped."""

    size: int | None
    limits: tuple[EngineLimit, ...]
    skipped: Omitted[LongSkip] = None
    status: Omitted[int] = None
    ttft_s: Omitted[float] = None
    total_s: Omitted[float] = None
    prompt_tokens: Omitted[int] = None
    completion_tokens: Omitted[int] = None
    error: Omitted[str] = None
    error_detail: Omitted[str] = None

    @property
    def failed(self) -> bool:
        """Sent, and it got an error or no content token."""
        return self.size is not None and (self.error is not None or not self.completion_tokens)


def long_prompt_size(limits: Iterable[EngineLimit], shorter_than: int) -> int | LongSkip:
    """The long prompt's size in tokens: the smallest limit read, less
    :data:`TEMPLATE_HEADROOM`, at most :data:`LONG_PROMPT_CAP`; a :class:`LongSkip` when no
    limit was read, or when it leaves no prompt longer than ``shorter_than`` tokens."""
    read = [limit.tokens for limit in limits if limit.tokens is not None]
    if not read:
        return LongSkip.NO_LIMIT
    size = min(LONG_PROMPT_CAP, min(read) - TEMPLATE_HEADROOM)
    return size if size > shorter_than else LongSkip.NOT_LONGER
