"""The answers rule's false alarms and power, checked by seeded simulation.

Runs ``--runs`` simulated A/Bs per setting (:func:`servelab.core.answers.simulate.simulate_rule`):
both arms answer ``--pairs`` paired probes at batch 64 with the simulator's batch nondeterminism
(each greedy token flips with probability ``rate × 64 / 64``; rates 0 to 5%), the candidate
changing nothing else (false alarms: the rule says "changed") or also garbling one answer in
three (power: the incident's bf16 index keys). Each row prints the observed share with its 95%
Wilson interval beside α. Seeds ``--seed`` onwards.

    .venv/bin/python benchmarks/answers_rule.py --runs 2000
"""

from __future__ import annotations

import argparse
import time

from servelab.core.answers.rule import ALPHA, AnswersOutcome
from servelab.core.answers.simulate import ANSWER_TOKENS, answer_flip, simulate_rule
from servelab.core.case.experiment import wilson_interval

__all__ = ["main"]

RATES = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05)
PAIRS = (20, 30, 60, 120)


def _row(rate: float, pairs: int, garble: float, runs: int, seed: int) -> str:
    sim = simulate_rule(runs=runs, pairs=pairs, rate=rate, garble=garble, seed=seed)
    k = sim.outcomes.get(AnswersOutcome.CHANGED, 0)
    lo, hi = wilson_interval(k, runs)
    q = sum(answer_flip(rate, 64, n) for n in ANSWER_TOKENS) / len(ANSWER_TOKENS)
    inc = sim.share(AnswersOutcome.INCONCLUSIVE)
    return (f"| {rate:.3f} | {q:.1%} | {pairs} | {'1/3' if garble else '0'} | {k}/{runs} = "
            f"{k / runs:.2%} | [{lo:.2%}, {hi:.2%}] | {inc:.0%} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    head = ("| token flip rate | answers differing per arm | pairs | candidate garbles | "
            "said \"changed\" | 95% interval | inconclusive |")  # fmt: skip
    print(f"### False alarms (α = {ALPHA}): a candidate that changes nothing\n")
    print(head + "\n|---|---|---|---|---|---|---|")
    for rate in RATES:
        for pairs in PAIRS:
            print(_row(rate, pairs, 0.0, args.runs, args.seed))
    print("\n### Power: a candidate that also garbles one answer in three\n")
    print(head + "\n|---|---|---|---|---|---|---|")
    for rate in (0.0, 0.01, 0.05):
        for pairs in PAIRS:
            print(_row(rate, pairs, 1 / 3, args.runs, args.seed))
    print(f"\n{args.runs} runs per row, seed {args.seed}; {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
