"""The planner of ``case bisect`` (ddmin): probe counts on the incident-sized cases, every path of
the state machine, resume through the codec, and a seeded property test over many random cases."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from itertools import combinations

import pytest

from servelab.core.case.bisect import (
    Bisected,
    BisectState,
    Change,
    NextProbe,
    Probe,
    ProbeOutcome,
    next_step,
    record_probe,
    start_bisect,
)
from servelab.core.case.probe import bisect_verdicts
from servelab.core.ledger.codec import decode, encode

GOOD, BAD, UNDECIDED = ProbeOutcome.GOOD, ProbeOutcome.BAD, ProbeOutcome.UNDECIDED
Test = Callable[[frozenset[int]], ProbeOutcome]


def _changes(n: int) -> list[Change]:
    return [Change("decode", f"KNOB_{i}", "0", "1") for i in range(n)]


def _guilty(*sets: set[int]) -> Test:
    """Bad exactly when the probe holds all of one guilty set."""
    return lambda probe: BAD if any(s <= probe for s in sets) else GOOD


def _run(n: int, test: Test) -> tuple[Bisected, BisectState]:
    state = start_bisect(_changes(n))
    for _ in range(2**n):
        step = next_step(state)
        if isinstance(step, Bisected):
            return step, state
        assert step.changes == tuple(state.changes[i] for i in step.indices)
        state = record_probe(state, test(frozenset(step.indices)))
    raise AssertionError("the planner did not finish")


def _ddmin(state: BisectState) -> tuple[Probe, ...]:
    """ddmin's probes: those after the first, the good state's (probed good)."""
    assert state.probes[0] == Probe((), GOOD)
    return state.probes[1:]


@pytest.mark.parametrize("guilty", range(6))
def test_one_guilty_change_of_six_is_found_in_fewer_than_six_probes(guilty: int) -> None:
    found, state = _run(6, _guilty({guilty}))
    assert found.indices == (guilty,) and found.changes == (state.changes[guilty],)
    assert found.minimal and found.unproven == () and found.undecided == 0
    assert found.probes == len(state.probes) and len(_ddmin(state)) <= 5


def test_the_probe_counts_of_every_single_guilty_change_of_six() -> None:
    counts = [_run(6, _guilty({g}))[0].probes - 1 for g in range(6)]  # ddmin's, after the good
    assert counts == [3, 4, 3, 4, 5, 4]  # the report's table; trying each alone takes 6


@pytest.mark.parametrize("pair", list(combinations(range(6), 2)))
def test_a_pair_guilty_only_together_is_found_as_the_pair(pair: tuple[int, int]) -> None:
    found, state = _run(6, _guilty(set(pair)))
    assert found.indices == pair and found.minimal
    assert len(_ddmin(state)) <= 18  # trying every single change and every pair would take 21


def test_the_paths_subset_complement_finer_and_done() -> None:
    """Changes 1 and 4 of six guilty only together: no half and no quarter is bad alone, so the
    complements reduce (to {0,1,3,4,5}, then {0,1,3,4}, {1,3,4}, {1,4}) with finer splits
    between; no set is probed twice."""
    found, state = _run(6, _guilty({1, 4}))
    probes = [(p.changes, p.outcome) for p in _ddmin(state)]
    assert probes[:2] == [((0, 1, 2), GOOD), ((3, 4, 5), GOOD)]  # g = 2: no half alone
    assert [c for c, _ in probes[2:6]] == [(0, 1), (2,), (3, 4), (5,)]  # g = 4: finer
    assert [c for c, o in probes if o is BAD] == [(0, 1, 3, 4, 5), (0, 1, 3, 4), (1, 3, 4),
                                                  (1, 4)]  # fmt: skip
    assert found.indices == (1, 4) and found.probes == 1 + 16


def test_a_single_change_is_guilty_without_a_ddmin_probe() -> None:
    """Only the good state's probe (issue 38: it was none, and a change was convicted unseen)."""
    found, state = _run(1, _guilty({0}))
    assert found.indices == (0,) and found.probes == 1 and found.minimal and not _ddmin(state)


def test_an_undecided_part_reduces_nothing_and_the_search_goes_on() -> None:
    """The first half undecided: ddmin moves on to the second half (bad) and finds change 4."""

    def test(probe: frozenset[int]) -> ProbeOutcome:
        return UNDECIDED if probe == {0, 1, 2} else _guilty({4})(probe)

    found, state = _run(6, test)
    assert _ddmin(state)[0] == Probe((0, 1, 2), UNDECIDED)
    assert found.indices == (4,) and found.minimal and found.undecided == 1


def test_an_undecided_complement_is_skipped_for_the_next_one() -> None:
    """The pair {1, 4}: the first complement that holds it is undecided, so ddmin tries the next
    complements and reduces on the next bad one."""

    def test(probe: frozenset[int]) -> ProbeOutcome:
        return UNDECIDED if probe == {0, 1, 3, 4, 5} else _guilty({1, 4})(probe)

    found, state = _run(6, test)
    probes = [(p.changes, p.outcome) for p in _ddmin(state)]
    assert probes[6:9] == [((2, 3, 4, 5), GOOD), ((0, 1, 3, 4, 5), UNDECIDED),
                           ((0, 1, 2, 5), GOOD)]  # fmt: skip
    assert probes[9] == ((0, 1, 2, 3, 4), BAD)
    assert found.indices == (1, 4) and found.minimal and found.undecided == 1


def test_an_undecided_removal_leaves_the_change_unproven() -> None:
    """Change 2 guilty of four, and the probe of change 2 alone undecided: the set found, {2, 3},
    is bad, but change 3 is not shown needed (the set without it was undecided)."""

    def test(probe: frozenset[int]) -> ProbeOutcome:
        return UNDECIDED if probe == {2} else _guilty({2})(probe)

    found, state = _run(4, test)
    assert [p.changes for p in _ddmin(state)] == [(0, 1), (2, 3), (2,), (3,)]
    assert found.indices == (2, 3)
    assert not found.minimal and found.unproven == (3,)


def test_recording_after_the_end_and_bad_inputs_are_refused() -> None:
    _, state = _run(3, _guilty({1}))
    with pytest.raises(ValueError, match="done"):
        record_probe(state, GOOD)
    with pytest.raises(ValueError, match="one or more distinct"):
        start_bisect([])
    with pytest.raises(ValueError, match="one or more distinct"):
        start_bisect([_changes(1)[0], _changes(1)[0]])


def test_a_stored_state_resumes_where_it_stopped() -> None:
    test = _guilty({0, 5})
    state = start_bisect(
        [Change("decode", "SGLANG_SM120_MMA_TARGET_CTAS", "512", "256"),
         Change("decode", "--disable-overlap-schedule", "off", "on"),
         Change("decode", "--json-model-override-args.index_topk", "2048", "1024"),
         Change("prefill", "HARMLESS", None, "1"),
         Change("router", "--health-check-interval-secs", "10", "5"),
         Change("decode", "--config.bf16_index_keys", None, "true")]
    )  # fmt: skip
    for _ in range(4):
        step = next_step(state)
        assert isinstance(step, NextProbe)
        state = record_probe(state, test(frozenset(step.indices)))
    stored = json.dumps(encode(state))
    again = decode(BisectState, stored)
    assert again == state and type(again.probes[0].outcome) is ProbeOutcome
    while isinstance(step := next_step(again), NextProbe):
        again = record_probe(again, test(frozenset(step.indices)))
    assert step.indices == (0, 5) and step.minimal
    assert step.probes == _run(6, test)[0].probes  # as if never stopped


def _random_test(rng: random.Random, n: int) -> Test:
    """Any outcome for any subset (fixed once drawn), the good and bad states as given."""
    table = {frozenset(): GOOD, frozenset(range(n)): BAD}

    def test(probe: frozenset[int]) -> ProbeOutcome:
        if probe not in table:
            table[probe] = rng.choice((GOOD, BAD, UNDECIDED, GOOD, BAD))
        return table[probe]

    return test


def _check_one_minimal(found: Bisected, state: BisectState, test: Test) -> None:
    n = len(state.changes)
    probed = [frozenset(p.changes) for p in state.probes]
    assert len(set(probed)) == len(probed), "a subset was probed twice"
    assert probed[0] == frozenset() and frozenset(range(n)) not in probed
    guilty = frozenset(found.indices)
    assert guilty == frozenset(range(n)) or test(guilty) is BAD
    assert set(found.unproven) <= guilty and found.minimal == (not found.unproven)
    for c in guilty - set(found.unproven):
        assert not guilty - {c} or test(guilty - {c}) is GOOD


def test_property_the_planner_finds_a_minimal_guilty_set() -> None:
    """600 seeded random cases: n changes (1..10), one to three guilty sets of one to three
    changes (bad when all of one set are applied). The result is one of the guilty sets that is
    minimal: bad, and every proper subset good."""
    rng = random.Random(20261202)
    for _ in range(600):
        n = rng.randint(1, 10)
        sets = [set(rng.sample(range(n), rng.randint(1, min(3, n))))
                for _ in range(rng.randint(1, 3))]  # fmt: skip
        test = _guilty(*sets)
        found, state = _run(n, test)
        guilty = set(found.indices)
        assert found.minimal and test(frozenset(guilty)) is BAD
        assert all(test(frozenset(sub)) is GOOD
                   for k in range(len(guilty)) for sub in combinations(guilty, k))  # fmt: skip
        assert guilty in sets
        _check_one_minimal(found, state, test)


def test_property_with_undecided_probes_and_changes_that_cure() -> None:
    """600 seeded random tests that need not be monotone (a change can cure another) and answer
    undecided a fifth of the time: the planner always ends, never probes a set twice, its set is
    bad, and every change not named unproven is needed (without it the set is good)."""
    rng = random.Random(7)
    for _ in range(600):
        n = rng.randint(1, 9)
        test = _random_test(rng, n)
        found, state = _run(n, test)
        _check_one_minimal(found, state, test)


# -- the good and the bad state probed first (issue 38, the twenty-first pass) -----------------


def test_the_good_state_is_probed_first_against_the_bad_state() -> None:
    """The first probe applies no change (the good state, against the bad one as every probe):
    nothing is convicted before the failure is seen in the bad state and not without the changes."""
    step = next_step(start_bisect(_changes(3)))
    assert isinstance(step, NextProbe) and step.indices == () and step.changes == ()


def test_a_test_that_never_fails_convicts_nothing() -> None:
    """The repro: one change, a test that never fails (``throughput@C8<1``): the good state's
    probe is undecided (the bad state never failed), and nothing is guilty."""
    for n in (1, 2, 6):
        found, state = _run(n, lambda probe: UNDECIDED)
        assert state.probes == (Probe((), UNDECIDED),)
        assert found.indices == () and found.changes == () and not found.minimal
        assert found.good_state is UNDECIDED and found.probes == 1 and found.undecided == 1


def test_a_test_that_always_fails_convicts_nothing() -> None:
    """A test that fails in every state (``throughput@C8>1``): the good state fails like the bad
    one, so these changes are not the cause; nothing is guilty and no verdict is given."""
    for n in (1, 2, 6):
        found, state = _run(n, lambda probe: BAD)
        assert state.probes == (Probe((), BAD),)
        assert found.indices == () and not found.minimal and found.good_state is BAD
        assert bisect_verdicts(state.changes, found) == ()


def test_a_single_change_is_convicted_only_after_the_good_state_passed() -> None:
    found, state = _run(1, _guilty({0}))
    assert state.probes == (Probe((), GOOD),)
    assert found.indices == (0,) and found.minimal and found.good_state is GOOD
    assert bisect_verdicts(state.changes, found) == (("knob:decode/KNOB_0", "convicted"),)
