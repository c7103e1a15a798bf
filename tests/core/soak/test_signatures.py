"""Failure signatures: each failed request is classified from its record alone, a stall by the one
stall rule; each distinct signature is localized once, within the budget."""

from __future__ import annotations

import servelab.core.soak.signatures as sig_mod
from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_DEADLINE,
    REASON_IDLE,
    REASON_INTERRUPTED,
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
    RequestRecord,
)
from servelab.core.soak.signatures import (
    MAX_LOCALIZATIONS,
    Failure,
    Outcome,
    Phase,
    Signature,
    classify,
    outcome_of,
    phase_of,
    stall,
    to_localize,
)


def test_public_api_is_explicit() -> None:
    for name in sig_mod.__all__:
        assert hasattr(sig_mod, name), name


def test_the_stall_rule_idle_or_deadline_head_or_body() -> None:
    assert stall(REASON_IDLE, Phase.HEAD) == Signature.STALL_HEAD
    assert stall(REASON_IDLE, Phase.BODY) == Signature.STALL_BODY
    assert stall(REASON_DEADLINE, Phase.HEAD) == Signature.STALL_HEAD  # cut: not done in time
    assert stall(REASON_DEADLINE, Phase.BODY) == Signature.STALL_BODY
    for other in (None, REASON_CONNECTION, REASON_TRUNCATED, REASON_INTERRUPTED, "http 503"):
        assert stall(other, Phase.HEAD) is None and stall(other, Phase.BODY) is None


def test_a_records_phase_and_outcome_follow_the_rule() -> None:
    waiting = RequestRecord(index=0, scheduled_ns=0)
    waiting.fail(REASON_IDLE)
    assert (phase_of(waiting), outcome_of(waiting)) == (Phase.HEAD, Outcome.STALLED)
    streamed = RequestRecord(index=1, scheduled_ns=0, first_byte_ns=5)
    streamed.fail(REASON_DEADLINE)
    assert (phase_of(streamed), outcome_of(streamed)) == (Phase.BODY, Outcome.STALLED)
    refused = RequestRecord(index=2, scheduled_ns=0)
    refused.fail(REASON_CONNECTION)
    assert outcome_of(refused) == Outcome.ERROR
    done = RequestRecord(index=3, scheduled_ns=0, first_byte_ns=5, end_ns=9)
    assert outcome_of(done) == Outcome.OK


def test_each_failure_gets_its_signature() -> None:
    assert classify(200, None, "", Phase.BODY) is None
    assert classify(None, REASON_IDLE, "", Phase.HEAD) == Signature.STALL_HEAD
    assert classify(200, REASON_IDLE, "", Phase.BODY) == Signature.STALL_BODY
    transfer = '{"error":{"message":"KV transfer of room 7 failed"}}'
    assert classify(500, "http 500", transfer, Phase.HEAD) == Signature.KV_TRANSFER
    assert classify(
        200, REASON_SERVER_ERROR, "data: {'error': bootstrap timed out}", Phase.BODY
    ) == (Signature.KV_TRANSFER)
    assert classify(503, "http 503", "No available prefill workers", Phase.HEAD) == (
        Signature.HTTP_5XX
    )
    assert classify(404, "http 404", "not found", Phase.HEAD) == Signature.HTTP_4XX
    assert classify(None, REASON_CONNECTION, "ConnectionRefusedError", Phase.HEAD) == (
        Signature.RESET
    )
    assert classify(200, REASON_TRUNCATED, "payload cut", Phase.BODY) == Signature.RESET
    assert classify(200, REASON_MALFORMED, "data: {'bad", Phase.BODY) == Signature.MALFORMED


def test_codes_keep_their_stored_values() -> None:
    assert [s.value for s in Signature] == [
        "stall_head", "stall_body", "kv_transfer", "http_5xx", "http_4xx", "reset", "malformed",
        "correctness", "held_stream", "resent",
    ]  # fmt: skip
    assert [p.value for p in Phase] == ["head", "body"]
    assert [o.value for o in Outcome] == ["ok", "stalled", "error"]


def _f(sig: Signature, session: int = 0) -> Failure:
    return Failure(sig, session, 1, 100, 0.5, 1)


def test_one_localization_per_distinct_signature_within_the_budget() -> None:
    head, http, reset, bad = (
        Signature.STALL_HEAD, Signature.HTTP_5XX, Signature.RESET, Signature.MALFORMED
    )  # fmt: skip
    seen = [_f(head), _f(head, 1), _f(http), _f(reset), _f(bad)]
    picked = to_localize(seen, [])
    assert [f.signature for f in picked] == [head, http, reset][:MAX_LOCALIZATIONS]
    assert picked[0].session == 0  # the first one of its kind
    assert to_localize([_f(http)], [http]) == []
    assert to_localize([_f(bad)], [head, http, reset]) == []  # budget spent
