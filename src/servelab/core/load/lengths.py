"""How long a request may be, checked before any prompt is built (pure).

A prompt is built whole in memory (one word ≈ one token, about 7 bytes a word), so a length is
a memory bound as much as a workload: ``--input-len 100000000`` or a trace line with
``input_length`` 10⁹ would build gigabytes before the first request. Every length is therefore
checked up front:

- against :data:`MAX_TOKENS` as it is read (``--input-len``, ``--output-len``, a trace line):
  no model's context is longer, whatever the server;
- against the model's context length once the server said it (``max_model_len`` in
  ``GET /v1/models``, which SGLang and vLLM both list): prompt and output together must fit, as
  both engines refuse a request whose prompt and ``max_tokens`` pass it (SGLang's
  ``_validate_one_request``, vLLM's ``_validate_input``);
- against :data:`UNKNOWN_CONTEXT_TOKENS` when the server does not say it;
- a run's prompts together (its requests, each built before it starts, at most
  :data:`~servelab.core.load.workload.MAX_REQUESTS`) against :data:`MAX_RUN_WORDS`.
"""

from __future__ import annotations

from servelab.core.load.workload import LengthDist

__all__ = [
    "MAX_RUN_WORDS",
    "MAX_TOKENS",
    "NORMAL_SIGMAS",
    "UNKNOWN_CONTEXT_TOKENS",
    "context_limit",
    "longest",
    "over_context",
    "over_run",
]

#: The most tokens one request may have (prompt and output), whatever the server: 16 Mi, past
#: every model's context (Llama 4 Scout's 10 M is the longest published).
MAX_TOKENS = 1 << 24
#: The most tokens one request may have when the server does not say its context length: 1 Mi
#: (a prompt of about 7 MB), past the context of the models PD deployments serve.
UNKNOWN_CONTEXT_TOKENS = 1 << 20
#: The most prompt words one run (or warm-up) builds before it starts, at its prompts' mean
#: length: 25 M, about 500 MB of prompts and request bytes (100,000 requests of 128 words, the
#: most a run sends, peak at 330 MB in all).
MAX_RUN_WORDS = 25_000_000
#: A normal length distribution's largest draw, counted at its mean plus this many σ.
NORMAL_SIGMAS = 6


def longest(dist: LengthDist) -> int:
    """The largest length ``dist`` draws (a normal one: its mean plus :data:`NORMAL_SIGMAS` σ)."""
    match dist.kind:
        case "uniform":
            top = dist.value + dist.spread
        case "normal":
            top = dist.value + NORMAL_SIGMAS * dist.spread
        case _:
            top = dist.value
    return max(dist.minimum, round(top))


def context_limit(context_length: int | None) -> int:
    """The most tokens a request may have: the model's context, else the cap for the unknown."""
    return UNKNOWN_CONTEXT_TOKENS if context_length is None else context_length


def over_context(tokens: int, context_length: int | None) -> str | None:
    """Why a request of ``tokens`` (prompt and output) is refused before it is built (None: it
    fits): the limit it passes, said with where it comes from."""
    limit = context_limit(context_length)
    if tokens <= limit:
        return None
    if context_length is None:
        return (f"over {limit:,} tokens, the cap when the server does not list its context "
                "length (max_model_len in /v1/models)")  # fmt: skip
    return f"over the model's context length of {limit:,} tokens (max_model_len in /v1/models)"


def over_run(requests: int, input_len: LengthDist) -> str | None:
    """Why a run of ``requests`` prompts drawn from ``input_len`` is refused before it is built
    (None: it fits :data:`MAX_RUN_WORDS`)."""
    words = requests * max(input_len.value, input_len.minimum)
    if words <= MAX_RUN_WORDS:
        return None
    return (f"{words:,.0f} prompt words built before the run starts, over {MAX_RUN_WORDS:,}: "
            "fewer requests a run (and more --repeat), or shorter prompts")  # fmt: skip
