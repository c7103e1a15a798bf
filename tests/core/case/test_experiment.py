"""The verdict experiment's statistics and rule: Fisher's exact test, Newcombe's interval."""

from __future__ import annotations

import json

import pytest
from scipy.stats import fisher_exact

from servelab.core.bench.contract import BenchConfig
from servelab.core.case.experiment import (
    ARM_REVERT,
    ARM_SUSPECT,
    CONVICTED,
    EXONERATED,
    INCONCLUSIVE,
    RULE_BOUND,
    RULE_NEITHER,
    RULE_NOT_PERSISTED,
    RULE_NOT_REPRODUCED,
    RULE_SIGNIFICANT,
    ArmTally,
    BenchWorkload,
    Decision,
    ExperimentRecord,
    ExperimentVisit,
    abba_order,
    decide,
    fisher_p,
    newcombe_interval,
    tally,
    wilson_interval,
)
from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.result import SoakConfig
from tests.support.old_rows import EXPERIMENT_WORKLOADS_BEFORE_TYPED


def _arms(sf: int, sn: int, rf: int, rn: int) -> tuple[ArmTally, ArmTally]:
    return ArmTally(ARM_SUSPECT, "512", sn, sf), ArmTally(ARM_REVERT, "256", rn, rf)


def test_fisher_p_is_scipys_two_sided_exact_test() -> None:
    suspect, revert = _arms(6, 6, 0, 6)
    assert fisher_p(suspect, revert) == pytest.approx(1 / 462 * 1)  # 2 / C(12, 6)
    assert fisher_p(suspect, revert) == pytest.approx(fisher_exact([[6, 0], [0, 6]]).pvalue)
    assert fisher_p(*_arms(4, 4, 4, 4)) == pytest.approx(1.0)


def test_fisher_p_equals_scipy_on_every_small_table() -> None:
    for n1, n2 in ((1, 1), (3, 3), (4, 6), (6, 6), (8, 5)):
        for a in range(n1 + 1):
            for b in range(n2 + 1):
                ours = fisher_p(ArmTally("s", None, n1, a), ArmTally("r", None, n2, b))
                theirs = fisher_exact([[a, n1 - a], [b, n2 - b]]).pvalue
                assert ours == pytest.approx(theirs, abs=1e-12), (n1, n2, a, b)
    assert fisher_p(*_arms(0, 0, 3, 3)) == 1.0  # an empty arm tells nothing


def test_wilson_interval_behaves_at_the_edges() -> None:
    lo, hi = wilson_interval(6, 6)
    assert hi == pytest.approx(1.0) and lo == pytest.approx(6 / (6 + 1.959964**2), rel=1e-4)
    assert wilson_interval(0, 6)[0] == pytest.approx(0.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-3) and hi == pytest.approx(0.7634, abs=1e-3)


def test_newcombe_interval_matches_the_published_example() -> None:
    # Newcombe (1998), Table II example (56/70 vs 48/80): method 10 gives 0.0524 .. 0.3339.
    lo, hi = newcombe_interval(ArmTally("a", None, 70, 56), ArmTally("b", None, 80, 48))
    assert lo == pytest.approx(0.0524, abs=1e-3) and hi == pytest.approx(0.3339, abs=1e-3)
    lo, hi = newcombe_interval(*_arms(6, 6, 6, 6))
    assert lo == pytest.approx(-hi) and 0 < hi < 0.5


@pytest.mark.parametrize(
    ("counts", "outcome", "rule"),
    [
        ((6, 6, 0, 6), CONVICTED, RULE_SIGNIFICANT),
        ((4, 4, 0, 4), CONVICTED, RULE_SIGNIFICANT),
        ((6, 6, 6, 6), EXONERATED, RULE_BOUND),
        ((0, 6, 0, 6), INCONCLUSIVE, RULE_NOT_REPRODUCED),
        ((6, 6, 5, 6), INCONCLUSIVE, RULE_NEITHER),
        ((2, 2, 2, 2), INCONCLUSIVE, RULE_NEITHER),  # too few sessions to exclude an effect
        ((3, 3, 0, 3), INCONCLUSIVE, RULE_NEITHER),  # p = 0.1: not significant at 3 each
        ((0, 6, 6, 6), INCONCLUSIVE, RULE_NOT_REPRODUCED),
        # bounded under 0.29, but every failure went with the revert: a rare failure it may cure
        ((2, 21, 0, 21), INCONCLUSIVE, RULE_NOT_PERSISTED),
        ((2, 21, 1, 21), EXONERATED, RULE_BOUND),
    ],
)
def test_the_rule(counts: tuple[int, int, int, int], outcome: str, rule: str) -> None:
    decision = decide(*_arms(*counts))
    assert (decision.outcome, decision.rule) == (outcome, rule)
    assert decision.interval[0] <= decision.difference <= decision.interval[1]


def test_a_worse_revert_exonerates_when_the_bound_excludes_the_effect() -> None:
    decision = decide(*_arms(2, 8, 8, 8))
    assert decision.outcome == EXONERATED and decision.difference < 0


def test_alpha_and_effect_are_the_callers() -> None:
    assert decide(*_arms(6, 6, 6, 6), effect=0.3).outcome == INCONCLUSIVE
    assert decide(*_arms(4, 4, 0, 4), alpha=0.01).outcome == INCONCLUSIVE


def test_abba_order_counterbalances() -> None:
    assert abba_order(1) == [ARM_SUSPECT, ARM_REVERT]
    assert abba_order(4) == ["suspect", "revert", "revert", "suspect"] * 2
    assert abba_order(3).count(ARM_SUSPECT) == abba_order(3).count(ARM_REVERT) == 3


def test_the_record_round_trips_through_json() -> None:
    visits = (
        ExperimentVisit(0, ARM_SUSPECT, "512", 3, 3, 7, 11, 4.2),
        ExperimentVisit(0, ARM_REVERT, "256", 3, 0, 8, 12, 3.9),
        ExperimentVisit(1, ARM_REVERT, "256", 3, 0, 9, 13, 3.8),
        ExperimentVisit(1, ARM_SUSPECT, "512", 3, 3, 10, 14, 4.0),
    )
    suspect, revert = tally(visits, ARM_SUSPECT, "512"), tally(visits, ARM_REVERT, "256")
    assert (suspect.failed, suspect.sessions, revert.failed, revert.sessions) == (6, 6, 0, 6)
    record = ExperimentRecord(
        case_id=1, target="knob:decode/K", suspect_value="512", revert_value="256", rounds=2,
        workload_soak_id=3, decision=decide(suspect, revert), suspect=suspect, revert=revert,
        visits=visits, found="512", left="512", elapsed_s=16.0, workload=SoakConfig(sessions=3),
    )  # fmt: skip
    doc = encode(record)
    assert doc["outcome"] == CONVICTED and doc["suspect"]["rate"] == 1.0
    again = decode(ExperimentRecord, json.loads(json.dumps(doc)))
    assert again == record and again.outcome == CONVICTED
    assert decode(Decision, {"p_value": 0.0}).p_value == 0.0  # a zero stays zero
    assert decode(ExperimentRecord, {}).outcome == INCONCLUSIVE


def test_an_experiment_stored_before_its_workload_was_typed_reads_the_same() -> None:
    """The workload was the stored JSON, read by nothing but the record's own JSON: a soak's
    config reads as that config, an answers test's flat bench as its test and bench, ``{}`` or a
    workload that no longer reads as None; each read is stored again as it was (the fields added
    since with their defaults)."""
    soak, bench, empty, unreadable = (json.loads(t) for t in EXPERIMENT_WORKLOADS_BEFORE_TYPED)
    read = decode(ExperimentRecord, {"case_id": 2, "workload": soak}).workload
    assert read == decode(SoakConfig, soak)
    assert isinstance(read, SoakConfig) and (read.sessions, read.rounds, read.seed) == (3, 4, 7)
    again = encode(ExperimentRecord(workload=read))["workload"]
    assert {k: again[k] for k in soak} == soak and list(again) == list(encode(read))
    answers = decode(ExperimentRecord, {"workload": bench}).workload
    assert isinstance(answers, BenchWorkload) and answers.test == "answers@C8"
    assert answers.bench == decode(BenchConfig, {k: v for k, v in bench.items() if k != "test"})
    assert answers.bench.requests == 40 and answers.bench.concurrencies == (8,)
    stored = encode(ExperimentRecord(workload=answers))["workload"]
    assert next(iter(stored)) == "test" and {k: stored[k] for k in bench} == bench
    assert decode(ExperimentRecord, {"workload": empty}).workload is None
    assert decode(ExperimentRecord, {"workload": unreadable}).workload is None
    assert encode(ExperimentRecord())["workload"] == {}
