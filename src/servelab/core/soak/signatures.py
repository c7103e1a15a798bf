"""Failure signatures: what kind of failure a soak request met (pure classification), and the one
rule of what a stall is.

:func:`stall` is the stall rule, the only place that decides it: the soak's client
(``servelab.ops.soak.client``), :func:`classify` and the soak's verdict
(``servelab.ops.soak.verdict``) all call it. A request that got no byte for the idle timeout
(:data:`~servelab.core.load.records.REASON_IDLE`) stalled; so did one the run's deadline cut
(:data:`~servelab.core.load.records.REASON_DEADLINE`): it had not finished within the bounded
time the soak promises, which is what an agent waiting on it sees. Which stall it is depends on
its :class:`Phase`: no response head yet (:attr:`Signature.STALL_HEAD`), or the stream started
and then went silent (:attr:`Signature.STALL_BODY`).

Every failed soak request (and every correctness violation) gets one signature; each distinct
signature starts one localization (:func:`to_localize`), at most :data:`MAX_LOCALIZATIONS` per
soak. The signature is decided from the request record alone: its HTTP status, failure reason,
detail and phase.

| signature | when |
|---|---|
| ``stall_head`` | no byte (not even the response head) for the idle timeout |
| ``stall_body`` | the stream started, then no byte for the idle timeout |
| ``kv_transfer`` | an error answer (HTTP or in-stream) that names the KV transfer / bootstrap |
| ``http_5xx`` / ``http_4xx`` | any other HTTP error status from the entry point |
| ``reset`` | the connection was refused, reset, or cut before the stream ended |
| ``malformed`` | the stream carried an event that is not valid (or an error event) |
| ``correctness`` | the answer arrived but is wrong (tool-call JSON, determinism) |
| ``held_stream`` | answered, but a hop held the stream (its first token or a gap far later) |
| ``resent`` | the client sent a request again: the server had closed its kept-alive connection |

The last two are not read from a request record: the soak notes them itself (its hop-timing
check; the client's resends, masked failures, a signature from the second one on).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
    RequestRecord,
)

__all__ = [
    "MAX_LOCALIZATIONS",
    "Failure",
    "Outcome",
    "Phase",
    "Signature",
    "classify",
    "outcome_of",
    "phase_of",
    "stall",
    "to_localize",
]


class Signature(StrEnum):
    """The kind of failure a request met (values stored in the ledger)."""

    STALL_HEAD = "stall_head"
    STALL_BODY = "stall_body"
    KV_TRANSFER = "kv_transfer"
    HTTP_5XX = "http_5xx"
    HTTP_4XX = "http_4xx"
    RESET = "reset"
    MALFORMED = "malformed"
    CORRECTNESS = "correctness"
    HELD = "held_stream"
    RESENT = "resent"


class Phase(StrEnum):
    """Where a request was when it failed: before its response head, or inside its body."""

    HEAD = "head"
    BODY = "body"


class Outcome(StrEnum):
    """How one request (a session's, a replay's) ended."""

    OK = "ok"
    STALLED = "stalled"
    ERROR = "error"


#: Localizations one soak runs at most (one per distinct signature, the first ones seen).
MAX_LOCALIZATIONS = 3

#: Words of an error answer that name the PD KV transfer (SGLang decode, the router's codes).
_TRANSFER_WORDS = ("kv transfer", "transfer of room", "bootstrap", "waitingforinput", "kvpoll")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed request as the soak saw it: where, what it carried, what it got.

    ``idle_s``: how long its kept-alive connection sat unused before it (0 on a new one);
    ``in_flight``: the most of the soak's requests in flight at once while it was out, itself
    included (the load it met); ``server`` the answer's ``Server`` header; ``echoed_id`` whether
    the answer carried the request's own ``x-request-id`` back (the router returns it, a proxy's
    own error page does not; None: no answer head came).
    """

    signature: Signature
    session: int
    round: int
    payload_bytes: int
    connection_age_s: float
    connection_requests: int  # requests the connection carried before this one
    status: int | None = None
    error: str = ""
    detail: str = ""
    received_bytes: int = 0
    phase: Phase = Phase.HEAD
    idle_s: float = 0.0
    in_flight: int = 1
    server: str = ""
    echoed_id: bool | None = None


def phase_of(record: RequestRecord) -> Phase:
    """:attr:`Phase.HEAD` while no response head arrived, then :attr:`Phase.BODY`."""
    return Phase.HEAD if record.first_byte_ns is None else Phase.BODY


def stall(error: str | None, phase: Phase) -> Signature | None:
    """The stall rule: the stall a request's failure reason ``error`` is, in ``phase``; None
    when it is not a stall (see the module docstring)."""
    if error not in (REASON_IDLE, REASON_DEADLINE):
        return None
    return Signature.STALL_HEAD if phase == Phase.HEAD else Signature.STALL_BODY


def outcome_of(record: RequestRecord) -> Outcome:
    """How a request ended: ok, stalled (:func:`stall`), or any other error."""
    if record.ok:
        return Outcome.OK
    return Outcome.ERROR if stall(record.error, phase_of(record)) is None else Outcome.STALLED


def _names_transfer(detail: str) -> bool:
    text = detail.lower()
    return any(word in text for word in _TRANSFER_WORDS)


def classify(status: int | None, error: str | None, detail: str, phase: Phase) -> Signature | None:
    """The signature of a request's outcome (None: it did not fail)."""
    if error is None:
        return None
    stalled = stall(error, phase)
    if stalled is not None:
        return stalled
    if _names_transfer(detail):
        return Signature.KV_TRANSFER
    if status is not None and status >= 300:
        return Signature.HTTP_5XX if status >= 500 else Signature.HTTP_4XX
    if error in (REASON_MALFORMED, REASON_SERVER_ERROR):
        return Signature.MALFORMED
    if error in (REASON_CONNECTION, REASON_TRUNCATED):
        return Signature.RESET
    return Signature.MALFORMED


def to_localize(
    failures: Iterable[Failure], done: Iterable[Signature], limit: int = MAX_LOCALIZATIONS
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
