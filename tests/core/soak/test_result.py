"""The one soak result: through the codec and back, every kind of observation and code typed, the
determinism probe, the sessions counted, the knobs it ran with."""

from __future__ import annotations

import json
import typing

import pytest

import servelab.core.soak.result as result_mod
from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.finding import Finding
from servelab.core.soak.observation import Observation
from servelab.core.soak.result import (
    Determinism,
    FailedRequest,
    SessionOutcome,
    SoakConfig,
    SoakResult,
    SoakSessions,
)
from servelab.core.soak.signatures import Signature
from servelab.core.soak.undecided import NextProbe, UndecidedReason
from servelab.core.telemetry.layers import Layer
from tests.support.soakresult import every_kind_result, kinds


def test_public_api_is_explicit() -> None:
    for name in result_mod.__all__:
        assert hasattr(result_mod, name), name


def test_a_result_with_every_kind_of_observation_reads_back_equal() -> None:
    result = every_kind_result()
    assert kinds(result.observations) == {
        typing.get_type_hints(t)["kind"].__args__[0] for t in typing.get_args(Observation)
    }  # every kind is in it
    stored = json.loads(json.dumps(encode(result)))
    back = decode(SoakResult, stored)
    assert back == result
    assert isinstance(back.findings[0], Finding) and back.findings[0].layer is Layer.PD_PAIR
    assert back.findings[1].layer is Layer.DECODE_TRANSFER  # the mismatched pair ranks first
    assert back.failures[1].signature is Signature.HTTP_5XX
    assert not back.ok and back.config.knob("decode", "K") == "512"


def test_codes_are_stored_as_their_values_and_nothing_worded() -> None:
    stored = encode(every_kind_result())
    assert stored["findings"][0]["layer"] == "pd_pair"
    assert stored["findings"][1]["layer"] == "decode_transfer"
    assert set(stored["findings"][1]) == {
        "layer", "confidence", "supporting", "contradicting", "worker"
    }  # fmt: skip
    assert stored["stalls"][0]["phase"] == "head"
    assert stored["localizations"][0]["matrix"]["cells"][0]["outcome"] == "stalled"
    text = json.dumps(stored)
    assert "title" not in text and "advice" not in text  # the words are report's


def test_an_undecided_result_keeps_its_codes() -> None:
    result = SoakResult(SoakConfig(), every_kind_result().targets)
    stored = {"undecided": {"reason": "cold_start", "conflicting": ["a"], "unknown": [],
                            "probe": "soak_again_warm"}}  # fmt: skip
    back = decode(SoakResult, {**encode(result), **stored})
    assert back.undecided is not None
    assert (back.undecided.reason, back.undecided.probe) == (
        UndecidedReason.COLD, NextProbe.SOAK_WARM
    )  # fmt: skip


def test_the_sessions_are_counted_from_each_one() -> None:
    sessions = [SessionOutcome(0, rounds_done=3, requests=3), SessionOutcome(1, 1, 2)]
    counted = SoakSessions.of(sessions, rounds=3)
    assert (counted.count, counted.completed, counted.rounds_done, counted.requests) == (2, 1, 4, 5)
    assert counted.per_session == tuple(sessions)


@pytest.mark.parametrize(
    "det",
    [
        Determinism(),  # not checked
        Determinism(reference_ok=False),
        Determinism(reference_ok=True, sessions_ended_first=True),
        Determinism(reference_ok=True, under_load_ok=False, concurrency=3),
        Determinism(reference_ok=True, under_load_ok=True, concurrency=4, same_text=True),
    ],
)
def test_the_determinism_probe_keeps_what_was_measured(det: Determinism) -> None:
    assert decode(Determinism, json.loads(json.dumps(encode(det)))) == det


def test_a_failed_request_keeps_its_keys() -> None:
    failed = FailedRequest(2, 5, 503, "http 503", "overloaded")
    doc = {"session": 2, "round": 5, "status": 503, "error": "http 503", "detail": "overloaded"}
    assert encode(failed) == doc and list(encode(failed)) == list(doc)
    assert decode(FailedRequest, doc) == failed


def test_the_knobs_it_ran_with_prefer_service_qualified_names() -> None:
    config = SoakConfig(knobs={"decode/K": "512", "K": "1", "N": "7"})
    assert config.knob("decode", "K") == "512" and config.knob("prefill", "K") == "1"
    assert config.knob("prefill", "N") == "7" and config.knob("prefill", "M") is None
