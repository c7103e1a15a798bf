"""Failure signatures: what kind of failure a soak request met (pure classification).

Every failed soak request (and every correctness violation) gets one signature; each distinct
signature starts one localization (:func:`to_localize`), at most :data:`MAX_LOCALIZATIONS` per
soak. The signature is decided from the request record alone: its HTTP status, failure reason,
detail and phase.

| signature | when |
|---|---|
| :data:`STALL_HEAD` | no byte (not even the response head) for the idle timeout |
| :data:`STALL_BODY` | the stream started, then no byte for the idle timeout |
| :data:`KV_TRANSFER` | an error answer (HTTP or in-stream) that names the KV transfer / bootstrap |
| :data:`HTTP_5XX` / :data:`HTTP_4XX` | any other HTTP error status from the entry point |
| :data:`RESET` | the connection was refused, reset, or cut before the stream ended |
| :data:`MALFORMED` | the stream carried an event that is not valid (or an error event) |
| :data:`CORRECTNESS` | the answer arrived but is wrong (tool-call JSON, determinism) |
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
)

__all__ = [
    "CORRECTNESS",
    "HTTP_4XX",
    "HTTP_5XX",
    "KV_TRANSFER",
    "MALFORMED",
    "MAX_LOCALIZATIONS",
    "RESET",
    "SIGNATURES",
    "STALLS",
    "STALL_BODY",
    "STALL_HEAD",
    "Failure",
    "classify",
    "to_localize",
]

STALL_HEAD = "stall_head"
STALL_BODY = "stall_body"
HTTP_4XX = "http_4xx"
HTTP_5XX = "http_5xx"
RESET = "reset"
KV_TRANSFER = "kv_transfer"
MALFORMED = "malformed"
CORRECTNESS = "correctness"

SIGNATURES = (
    STALL_HEAD,
    STALL_BODY,
    KV_TRANSFER,
    HTTP_5XX,
    HTTP_4XX,
    RESET,
    MALFORMED,
    CORRECTNESS,
)
STALLS = (STALL_HEAD, STALL_BODY)

#: Localizations one soak runs at most (one per distinct signature, the first ones seen).
MAX_LOCALIZATIONS = 3

#: Words of an error answer that name the PD KV transfer (SGLang decode, the router's codes).
_TRANSFER_WORDS = ("kv transfer", "transfer of room", "bootstrap", "waitingforinput", "kvpoll")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed request as the soak saw it: where, what it carried, what it got."""

    signature: str
    session: int
    round: int
    payload_bytes: int
    connection_age_s: float
    connection_requests: int  # requests the connection carried before this one
    status: int | None = None
    error: str = ""
    detail: str = ""
    received_bytes: int = 0
    phase: str = "head"


def _names_transfer(detail: str) -> bool:
    text = detail.lower()
    return any(word in text for word in _TRANSFER_WORDS)


def classify(status: int | None, error: str | None, detail: str, phase: str) -> str | None:
    """The signature of a request's outcome (None: it did not fail)."""
    if error is None:
        return None
    if error in (REASON_IDLE, REASON_DEADLINE):
        return STALL_HEAD if phase == "head" else STALL_BODY
    if _names_transfer(detail):
        return KV_TRANSFER
    if status is not None and status >= 300:
        return HTTP_5XX if status >= 500 else HTTP_4XX
    if error in (REASON_MALFORMED, REASON_SERVER_ERROR):
        return MALFORMED
    if error in (REASON_CONNECTION, REASON_TRUNCATED):
        return RESET
    return MALFORMED


def to_localize(
    failures: Iterable[Failure], done: Iterable[str], limit: int = MAX_LOCALIZATIONS
) -> list[Failure]:
    """The first failure of each signature not localized yet, while the budget lasts."""
    seen = list(dict.fromkeys(done))
    picked: list[Failure] = []
    for failure in failures:
        if len(seen) >= limit:
            break
        if failure.signature not in seen:
            seen.append(failure.signature)
            picked.append(failure)
    return picked
