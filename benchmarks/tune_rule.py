"""The tune rule's error rates, checked by seeded simulation against what it claims.

Runs ``--runs`` simulated tunes per scenario (:func:`servelab.core.ab.tunecheck.simulate_tune`: each
visit's value ``exp(true mean log + block effect + e)``, block effect and ``e`` drawn
N(0, ``--noise``), 3% by default, like the simulator's run-to-run noise) with the rule's
defaults (``--alpha``, ``--margin``, ``--max-rounds``, ``--boundary``), seeds ``--seed`` ..
``--seed + runs - 1``, over five arms named as the incident's CTAS values. Scenarios: all arms
equal; one best by the margin (the others exactly the margin below it); a close second (half the
margin below the best, the rest twice the margin below); one clearly best (the rest three margins
below: +16% with the default 5% margin, like the incident's +12.8% at C64). For each it prints
every error's observed rate with its 95% Wilson interval beside the rule's claimed bound
(:func:`~servelab.core.ab.tunecheck.claimed_bounds`), then how the tunes stopped and what they cost
against the full design (every arm in every block of the budget).

    .venv/bin/python benchmarks/tune_rule.py --runs 2000
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from servelab.core.ab.sequential import BOUNDARIES
from servelab.core.ab.tune import TuneOutcome, TuneRule
from servelab.core.ab.tunecheck import Misclaim, RuleCheck, Scenario, check_rule, scenario_means
from servelab.core.case.experiment import wilson_interval
from servelab.core.ledger.codec import encode

__all__ = ["main"]

ARMS = ("128", "256", "384", "512", "768")
SCENARIOS = {
    Scenario.ALL_EQUAL: "all equal",
    Scenario.ONE_BEST: "one best by the margin",
    Scenario.CLOSE_SECOND: "a close second",
    Scenario.CLEAR_BEST: "one clearly best",
}
MISCLAIMS = {
    Misclaim.DROPPED_BEST: "a best arm dropped",
    Misclaim.WRONG_WINNER: "a winner not within the margin",
    Misclaim.TIED_RANKED: "two tied arms ranked apart",
    Misclaim.ANY_FALSE: "any false statement",
}
OUTCOMES = [o for o in TuneOutcome if o is not TuneOutcome.RUNNING]


def _claims_table(checks: dict[Scenario, RuleCheck]) -> str:
    lines = ["| scenario | error | claimed ≤ | observed | 95% interval |", "|---|---|---|---|---|"]
    for scenario, check in checks.items():
        for wrong, words in MISCLAIMS.items():
            k, n = check.errors[wrong], check.runs
            low, high = wilson_interval(k, n)
            lines.append(f"| {SCENARIOS[scenario]} | {words} | {check.bounds[wrong]:.3f} | "
                         f"{k / n:.4f} ({k}/{n}) | {low:.4f}–{high:.4f} |")  # fmt: skip
    return "\n".join(lines)


def _cost_table(checks: dict[Scenario, RuleCheck], seconds: dict[Scenario, float]) -> str:
    head = " | ".join(o.value for o in OUTCOMES)
    lines = [f"| scenario | {head} | mean blocks | mean visits / full design | saved | seconds |",
             "|---|" + "---|" * (len(OUTCOMES) + 4)]  # fmt: skip
    for scenario, check in checks.items():
        shares = " | ".join(f"{check.outcomes[o] / check.runs:.1%}" for o in OUTCOMES)
        saved = 1 - check.mean_visits / check.full_visits
        lines.append(f"| {SCENARIOS[scenario]} | {shares} | {check.mean_blocks:.1f} | "
                     f"{check.mean_visits:.1f} / {check.full_visits} | {saved:.0%} | "
                     f"{seconds[scenario]:.0f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = TuneRule()
    parser.add_argument("--runs", type=int, default=2000, help="simulated tunes per scenario")
    parser.add_argument("--noise", type=float, default=0.03, help="SD of ln value per visit")
    parser.add_argument("--alpha", type=float, default=defaults.alpha)
    parser.add_argument("--margin", type=float, default=defaults.margin)
    parser.add_argument("--max-rounds", type=int, default=defaults.max_rounds)
    parser.add_argument("--boundary", choices=BOUNDARIES, default=defaults.boundary)
    parser.add_argument("--seed", type=int, default=0, help="the first run's seed")
    parser.add_argument("--json", type=Path, default=None, help="also write the tallies here")
    args = parser.parse_args()
    rule = TuneRule(alpha=args.alpha, margin=args.margin, max_rounds=args.max_rounds,
                    boundary=args.boundary)  # fmt: skip
    print(f"{args.runs} tunes per scenario: {len(ARMS)} arms, noise {args.noise:.1%} per visit, "
          f"alpha {rule.alpha}, margin {rule.margin:.1%}, max rounds {rule.max_rounds}, "
          f"{rule.boundary} boundary, seeds {args.seed}..{args.seed + args.runs - 1}",
          flush=True)  # fmt: skip
    checks, seconds = {}, {}
    for scenario in SCENARIOS:
        start = time.perf_counter()
        means = scenario_means(scenario, ARMS, rule.margin)
        checks[scenario] = check_rule(means, args.noise, rule, args.runs, args.seed)
        seconds[scenario] = time.perf_counter() - start
    print()
    print(_claims_table(checks))
    print()
    print(_cost_table(checks, seconds))
    if args.json is not None:
        doc = {s.value: encode(c) for s, c in checks.items()}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
