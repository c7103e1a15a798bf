"""Failure signatures: each failed request is classified from its record alone; each distinct
signature is localized once, within the budget."""

from __future__ import annotations

import servelab.core.soak.signatures as sig_mod
from servelab.core.load.records import (
    REASON_CONNECTION,
    REASON_IDLE,
    REASON_MALFORMED,
    REASON_SERVER_ERROR,
    REASON_TRUNCATED,
)
from servelab.core.soak.signatures import (
    HTTP_4XX,
    HTTP_5XX,
    KV_TRANSFER,
    MALFORMED,
    MAX_LOCALIZATIONS,
    RESET,
    STALL_BODY,
    STALL_HEAD,
    Failure,
    classify,
    to_localize,
)


def test_public_api_is_explicit() -> None:
    for name in sig_mod.__all__:
        assert hasattr(sig_mod, name), name


def test_each_failure_gets_its_signature() -> None:
    assert classify(200, None, "", "body") is None
    assert classify(None, REASON_IDLE, "", "head") == STALL_HEAD
    assert classify(200, REASON_IDLE, "", "body") == STALL_BODY
    transfer = '{"error":{"message":"KV transfer of room 7 failed"}}'
    assert classify(500, "http 500", transfer, "head") == KV_TRANSFER
    assert classify(200, REASON_SERVER_ERROR, "data: {'error': bootstrap timed out}", "body") == (
        KV_TRANSFER
    )
    assert classify(503, "http 503", "No available prefill workers", "head") == HTTP_5XX
    assert classify(404, "http 404", "not found", "head") == HTTP_4XX
    assert classify(None, REASON_CONNECTION, "ConnectionRefusedError", "head") == RESET
    assert classify(200, REASON_TRUNCATED, "payload cut", "body") == RESET
    assert classify(200, REASON_MALFORMED, "data: {'bad", "body") == MALFORMED


def _f(sig: str, session: int = 0) -> Failure:
    return Failure(sig, session, 1, 100, 0.5, 1)


def test_one_localization_per_distinct_signature_within_the_budget() -> None:
    seen = [_f(STALL_HEAD), _f(STALL_HEAD, 1), _f(HTTP_5XX), _f(RESET), _f(MALFORMED)]
    picked = to_localize(seen, [])
    assert [f.signature for f in picked] == [STALL_HEAD, HTTP_5XX, RESET][:MAX_LOCALIZATIONS]
    assert picked[0].session == 0  # the first one of its kind
    assert to_localize([_f(HTTP_5XX)], [HTTP_5XX]) == []
    assert to_localize([_f(MALFORMED)], [STALL_HEAD, HTTP_5XX, RESET]) == []  # budget spent
