"""Why a rule could not judge is a stored code; a reading stored with an English reason (before
the codes) reads as its code and is worded as it was."""

from __future__ import annotations

import pytest

from servelab.core.ledger.codec import decode, encode
from servelab.core.telemetry import unknown
from servelab.core.telemetry.rules import RULE_CLIENT, UNKNOWN, TelemetryEvidence
from servelab.core.telemetry.unknown import TOO_SHORT, Unknown, upgrade_evidence
from servelab.report.soak.words import unknown_text

#: Every sentence a rule stored before the codes, and the code and detail it reads as.
OLD = [
    ("did not answer", Unknown.SOURCE_SILENT, None),
    ("HTTP 404 Not Found", Unknown.SOURCE_SILENT, "HTTP 404 Not Found"),
    ("no queue gauge", Unknown.NO_QUEUE_GAUGE, None),
    ("too few samples in the failing window or the baseline", Unknown.TOO_FEW_SAMPLES, None),
    ("decode(s) did not answer: decode-1, decode-2", Unknown.DECODES_SILENT, "decode-1, decode-2"),
    ("no decode", Unknown.NO_DECODE, None),
    ("the client did not count all the traffic in the window", Unknown.CLIENT_INCOMPLETE, None),
    ("fewer than 100 tokens counted by the decodes", Unknown.TOO_FEW_TOKENS, None),
]


def test_public_api() -> None:
    assert set(unknown.__all__) == {"TOO_SHORT", "Unknown", "upgrade_evidence"}


@pytest.mark.parametrize(("sentence", "code", "detail"), OLD)
def test_an_old_reason_reads_as_its_code_and_is_worded_as_it_was(
    sentence: str, code: Unknown, detail: str | None
) -> None:
    stored = {"rule": RULE_CLIENT, "subject": "decodes", "state": "unknown", "cites": [],
              "reason": sentence, "threshold": 0.25}  # fmt: skip
    read = decode(TelemetryEvidence, stored)
    assert (read.why, read.detail) == (code, detail)
    assert unknown_text(read) == sentence
    assert "reason" not in encode(read) and encode(read)["why"] == code.value


def test_a_reading_of_today_is_left_as_it_is() -> None:
    today = TelemetryEvidence(RULE_CLIENT, "decodes", UNKNOWN, why=Unknown.TOO_FEW_TOKENS)
    assert upgrade_evidence(encode(today)) == encode(today)
    assert decode(TelemetryEvidence, encode(today)) == today


def test_too_short_is_compared_as_codes() -> None:
    assert {Unknown.TOO_FEW_SAMPLES, Unknown.TOO_FEW_TOKENS} == TOO_SHORT
