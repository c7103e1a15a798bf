"""Screening several knobs: the fractions and their resolutions against the published ones, the
runs' balance, the alias chains, the effects on made-up responses, and the follow-up."""

from __future__ import annotations

import math
from itertools import combinations

import pytest

from servelab.core.ab.factorial import (
    FRACTIONS,
    LETTERS,
    EffectStatus,
    Factor,
    contrasts,
    estimate_effects,
    follow_up,
    resolution,
    screening_design,
)
from servelab.core.ab.tune import TuneRule

#: The resolutions the tables give (Box, Hunter & Hunter 2005, ch. 6; NIST/SEMATECH e-Handbook).
PUBLISHED = {
    ("C=AB",): 3,
    ("D=ABC",): 4,
    ("D=AB", "E=AC"): 3,
    ("E=ABCD",): 5,
    ("D=AB", "E=AC", "F=BC"): 3,
    ("E=ABC", "F=BCD"): 4,
    ("F=ABCDE",): 6,
    ("D=AB", "E=AC", "F=BC", "G=ABC"): 3,
    ("E=ABC", "F=BCD", "G=ACD"): 4,
    ("F=ABCD", "G=ABDE"): 4,
    ("G=ABCDEF",): 7,
    ("E=BCD", "F=ACD", "G=ABC", "H=ABD"): 4,
    ("G=ABCD", "H=ABEF"): 5,
    ("H=ABCDEFG",): 8,
}


def _factors(k: int) -> list[Factor]:
    return [Factor(f"knob{i}", "low", "high") for i in range(k)]


def test_every_fraction_has_its_published_resolution_and_generates_the_last_factors() -> None:
    assert sorted(map(tuple, PUBLISHED)) == sorted(g for gs in FRACTIONS.values() for g in gs)
    for k, fractions in FRACTIONS.items():
        runs = [2 ** (k - len(g)) for g in fractions]
        assert runs == sorted(runs)  # fewest runs first
        for generators in fractions:
            assert resolution(generators) == PUBLISHED[generators]
            assert [g[0] for g in generators] == list(LETTERS[k - len(generators) : k])
    assert resolution(()) is None


@pytest.mark.parametrize(
    ("k", "asked", "runs", "found"),
    [(1, 4, 2, None), (2, 4, 4, None), (3, 3, 4, 3), (3, 4, 8, None), (4, 4, 8, 4),
     (5, 4, 16, 5), (5, 3, 8, 3), (6, 4, 16, 4), (7, 4, 16, 4), (7, 5, 64, 7), (8, 4, 16, 4),
     (8, 5, 64, 5)],
)  # fmt: skip
def test_the_design_is_the_smallest_with_the_resolution_asked(
    k: int, asked: int, runs: int, found: int | None
) -> None:
    design = screening_design(_factors(k), asked)
    assert len(design.runs) == runs and design.resolution == found
    assert len(set(design.runs)) == runs  # no run twice
    columns = list(zip(*design.runs, strict=True))
    assert all(sum(col) == 0 for col in columns) or runs == 1  # balanced
    for a, b in combinations(columns, 2):
        assert sum(x * y for x, y in zip(a, b, strict=True)) == 0  # orthogonal main effects


def test_the_runs_read_as_settings_and_generated_columns_are_products() -> None:
    factors = [Factor("A", "256", "512"), Factor("B", "off", "on"), Factor("C", "1024", "2048"),
               Factor("D", "bf16", "fp8")]  # fmt: skip
    design = screening_design(factors)
    assert design.generators == ("D=ABC",)
    assert all(run[3] == run[0] * run[1] * run[2] for run in design.runs)
    assert design.settings(0) == (("A", "256"), ("B", "off"), ("C", "1024"), ("D", "bf16"))
    assert design.settings(1) == (("A", "512"), ("B", "off"), ("C", "1024"), ("D", "fp8"))
    with pytest.raises(ValueError, match="1 to 8 distinct"):
        screening_design([])
    with pytest.raises(ValueError, match="1 to 8 distinct"):
        screening_design(_factors(9))
    with pytest.raises(ValueError, match="1 to 8 distinct"):
        screening_design([factors[0], factors[0]])


def test_alias_chains_up_to_two_factor_interactions() -> None:
    four = contrasts(screening_design([Factor(n, "0", "1") for n in "pqrs"]))  # D = ABC: IV
    assert [c.effects for c in four] == [
        (("p",),), (("q",),), (("r",),), (("s",),),
        (("p", "q"), ("r", "s")), (("p", "r"), ("q", "s")), (("p", "s"), ("q", "r")),
    ]  # fmt: skip
    three = contrasts(screening_design([Factor(n, "0", "1") for n in "pqr"], 3))  # C = AB: III
    assert [c.effects for c in three] == [(("p",), ("q", "r")), (("q",), ("p", "r")),
                                          (("r",), ("p", "q"))]  # fmt: skip
    full = contrasts(screening_design([Factor(n, "0", "1") for n in "pqr"]))
    assert [len(c.effects) for c in full] == [1] * 6  # 3 main effects, 3 interactions, clear
    for c, d in combinations(four, 2):
        assert sum(x * y for x, y in zip(c.signs, d.signs, strict=True)) == 0


def _blocks(design_runs: tuple[tuple[int, ...], ...], model: dict[tuple[int, ...], float],
            blocks: int) -> list[list[float]]:  # fmt: skip
    """ln y = Σ effect/2 · (product of the effect's signs) + a block effect + a small wobble."""
    wobble = (0.003, -0.002, 0.001, -0.003, 0.002, 0.0, -0.001)
    out = []
    for b in range(blocks):
        row = []
        for r, run in enumerate(design_runs):
            ln = sum(e / 2 * math.prod(run[i] for i in f) for f, e in model.items())
            row.append(1000.0 * math.exp(ln + 0.05 * b + wobble[(r + 2 * b) % len(wobble)]))
        out.append(row)
    return out


def test_effects_an_interaction_and_the_follow_up_in_a_resolution_v_design() -> None:
    design = screening_design(_factors(5))  # 16 runs, V: interactions clear of each other
    model = {(0,): 0.10, (1,): -0.04, (0, 1): 0.06}
    estimates = estimate_effects(design, _blocks(design.runs, model, 8), TuneRule())
    by_effect = {e.contrast.effects[0]: e for e in estimates}
    assert by_effect[("knob0",)].estimate == pytest.approx(0.10, abs=0.005)
    assert by_effect[("knob0", "knob1")].estimate == pytest.approx(0.06, abs=0.005)
    active = {effect for effect, e in by_effect.items() if e.status is EffectStatus.ACTIVE}
    assert active == {("knob0",), ("knob1",), ("knob0", "knob1")}
    assert all(e.status is EffectStatus.NEGLIGIBLE for f, e in by_effect.items() if f not in active)
    plan = follow_up(design, estimates)
    assert plan.factors == ("knob0", "knob1") and plan.interactions == (("knob0", "knob1"),)
    assert plan.fixed == ("knob2", "knob3", "knob4") and plan.decided


def test_in_resolution_iv_an_active_chain_leaves_both_of_its_interactions_open() -> None:
    design = screening_design(_factors(4))  # AB = CD
    estimates = estimate_effects(design, _blocks(design.runs, {(0, 1): 0.08}, 6), TuneRule())
    plan = follow_up(design, estimates)
    assert plan.interactions == (("knob0", "knob1"), ("knob2", "knob3"))
    assert plan.factors == ("knob0", "knob1", "knob2", "knob3") and plan.fixed == ()


def test_too_few_blocks_leave_everything_undecided_and_bad_blocks_are_refused() -> None:
    design = screening_design(_factors(3))
    estimates = estimate_effects(design, _blocks(design.runs, {(0,): 0.1}, 2), TuneRule())
    assert all(e.status is EffectStatus.UNDECIDED and e.blocks == 2 for e in estimates)
    plan = follow_up(design, estimates)
    assert not plan.decided and plan.factors == ("knob0", "knob1", "knob2")
    with pytest.raises(ValueError, match="positive value for each of the 8 runs"):
        estimate_effects(design, [[1.0] * 7], TuneRule())
    with pytest.raises(ValueError, match="positive value"):
        estimate_effects(design, [[1.0] * 7 + [0.0]], TuneRule())
