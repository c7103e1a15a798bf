"""An A/B asked to check answers that cannot (its runs too short for a probe, a trace, a
capacity search) says so in its result, its headline and its JSON: the gate is never silently
off (an adversarial pass found `ab --answers gate --requests 1` ran on speed alone, unsaid)."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.ab.result import AbMetric, AbResult
from servelab.core.answers.contract import AnswersConfig, AnswersMode, AnswersUnchecked
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import encode
from servelab.core.load.slo import parse_slo
from servelab.core.load.workload import LengthDist
from servelab.ops.ab.ab import unchecked
from servelab.ops.ab.config import AbConfig
from servelab.report.ab import headline


def _config(requests: int, mode: AnswersMode = AnswersMode.GATE) -> AbConfig:
    fixed = LengthDist("fixed", 128)
    bench = BenchConfig(url="", concurrencies=(1,), requests=requests, input_len=fixed,
                        output_len=fixed)  # fmt: skip
    return AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=1,
                    answers=AnswersConfig(mode=mode))  # fmt: skip


def test_why_answers_asked_for_cannot_be_checked() -> None:
    assert unchecked(_config(1)) == AnswersUnchecked.TOO_FEW_REQUESTS
    assert unchecked(_config(1, AnswersMode.CHECK)) == AnswersUnchecked.TOO_FEW_REQUESTS
    assert unchecked(_config(1, AnswersMode.OFF)) is None  # not asked for
    assert unchecked(_config(400)) is None  # a run of 400 carries probes
    base = _config(400)
    slo = replace(base.bench, slo=parse_slo("ttft_p99=2s"))
    capacity = replace(base, bench=slo, metric=AbMetric.CAPACITY)
    assert unchecked(capacity) == AnswersUnchecked.CAPACITY


def test_the_headline_and_the_json_say_it() -> None:
    result = AbResult("decode", DEFAULT_KNOB, "256", "512",
                      answers_unchecked=AnswersUnchecked.TOO_FEW_REQUESTS)  # fmt: skip
    assert "answers NOT checked (a run's --requests cannot carry one probe" in headline(result)
    assert encode(result)["answers_unchecked"] == "too_few_requests"
    assert "answers_unchecked" not in encode(replace(result, answers_unchecked=None))
