"""The creep rule's words: each state, each cite, and the advice only when the creep alone
supports a finding."""

from __future__ import annotations

from servelab.core.soak.creep import RULE_CREEP
from servelab.core.soak.finding import Finding
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import FIRED, QUIET, UNKNOWN, Cite, TelemetryEvidence
from servelab.report.soak.creep import CREEP_ADVICE, creep_text
from servelab.report.soak.soak import finding_advice
from servelab.report.soak.words import layer_advice, telemetry_text

QUEUE = "sglang:num_decode_transfer_queue_reqs"


def test_each_state_and_cite_in_words() -> None:
    said = ((21, "rise"), (2240.5, "per_hour"), (35.2, "oldest_s"), (3, "other"))
    cites = tuple(Cite("decode", QUEUE, value, kind) for value, kind in said)
    fired = TelemetryEvidence(RULE_CREEP, "decode", FIRED, Layer.DECODE_TRANSFER, "decode", cites)
    text = telemetry_text(fired)
    assert text == creep_text(fired)
    assert "CREEPING" in text and "stayed 21 above its starting floor once idle" in text
    assert "climbing 2240.5 per hour" in text and "at least 35.2 s old and only ageing" in text
    assert f"{QUEUE} 3" in text
    assert "nothing creeps" in creep_text(TelemetryEvidence(RULE_CREEP, "decode", QUIET))
    assert "UNKNOWN" in creep_text(TelemetryEvidence(RULE_CREEP, "decode", UNKNOWN))


def test_the_creep_advice_only_when_decay_alone_shows_the_finding() -> None:
    alone = Finding(Layer.DECODE_TRANSFER, 0.5, (f"telemetry.{RULE_CREEP}.decode",), (), "decode")
    more = Finding(
        Layer.DECODE_TRANSFER, 0.8, ("matrix.pair", f"telemetry.{RULE_CREEP}.decode"), ()
    )
    assert finding_advice(alone) == CREEP_ADVICE
    assert finding_advice(more) == layer_advice(Layer.DECODE_TRANSFER)
