"""Rendering a tune (:class:`~servelab.core.ab.tunerun.TuneRecord`, live or read back from the
ledger): a screening's contrasts and what it left to tune (``--screen``); per concurrency the
ranking with each arm's interval against the leader, what each elimination rested on, and why the
rule stopped; the arm the concurrencies agree on and how the deployment was left; the cost against
the full design; the plot; and ``tune --plan``."""

from __future__ import annotations

import math
from collections.abc import Sequence

from servelab.core.ab.factorial import EffectEstimate
from servelab.core.ab.screenrun import LevelEffects, Screening
from servelab.core.ab.tune import ArmStatus, Comparison, Elimination, TuneOutcome, TuneState
from servelab.core.ab.tunecheck import Misclaim
from servelab.core.ab.tunerun import LevelTune, TuneMetric, TuneRecord
from servelab.core.ledger.codec import encode
from servelab.ops.ab.tuneplan import TunePlan
from servelab.report.answers import answers_phrase, arm_answers_cells, unchecked_phrase
from servelab.report.jsontext import json_text
from servelab.report.metric import METRIC_AXES, METRIC_UNITS, METRIC_WORDS, metric_where
from servelab.report.plots import tune_plot
from servelab.report.progress import over_budget_phrase
from servelab.report.text import md_code, md_text, show_value

__all__ = [
    "headline",
    "plan_markdown",
    "too_many_arms",
    "tune_json",
    "tune_markdown",
    "tune_png",
    "unshown_phrase",
]

_STOPS = {
    TuneOutcome.RUNNING: "not stopped by the rule",
    TuneOutcome.BEST: "one arm left: every other one was shown worse",
    TuneOutcome.WITHIN_MARGIN: "no arm left can beat the leader by the margin",
    TuneOutcome.BUDGET: "the block budget ran out (the leader is no claim)",
}


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.1f}%"


def _interval(c: Comparison) -> str:
    lo, hi = c.ratio_ci
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0:
        return "unbounded"
    return f"[{_pct(lo - 1)}, {_pct(hi - 1)}]"


def _versus(c: Comparison | None) -> tuple[str, str]:
    if c is None:
        return "—", "—"
    return f"{_pct(c.ratio - 1)} (n={c.blocks})", _interval(c)


def _mean(state: TuneState, arm: str) -> str:
    values = state.values[arm]
    if not values:
        return "—"
    geo = math.exp(sum(math.log(v) for v in values) / len(values))
    return f"{geo:.1f} (n={len(values)})"


def _winner_words(tune: LevelTune) -> str:
    r = tune.result
    if r.winner is None:
        return f"no winner: {_STOPS[r.outcome]}; leader {r.leader}"
    return f"winner {r.winner}: {_STOPS[r.outcome]}"


def headline(record: TuneRecord) -> str:
    """One line: each concurrency's winner, and the arm they agree on."""
    knobs = ", ".join(f"{k.service} {k.knob}" for k in record.knobs)
    each = "; ".join(f"{_where(record.metric, t.level)}: {t.result.winner or 'no winner'}"
                     for t in record.tunes)  # fmt: skip
    best = f"best {record.best}" if record.best is not None else "no arm best at every level"
    dropped = f"; dropped for changing answers: {', '.join(record.dropped)}" if record.dropped \
        else ""  # fmt: skip
    nothing = "no rival left" if record.dropped else _nothing(record.screening)
    why = record.answers_unchecked
    unchecked = "" if why is None else f"; {unchecked_phrase(why)}"
    if record.best_unshown:
        unchecked += (
            "; the best arm's answers not shown unchanged (too few probe pairs): on speed alone"
        )
    return f"tune {knobs}: {each or nothing} ({best}{dropped}){unchecked}"


def unshown_phrase(record: TuneRecord) -> str:
    """Why the best arm is not kept when the answers gate could not show its answers unchanged."""
    judged = next((j for j in record.answers or () if j.candidate.arm == record.best), None)
    counts = "" if judged is None else f" ({answers_phrase(judged)})"
    arms = () if judged is None else (judged.baseline, judged.candidate)
    cut = any(a.cut or a.unchecked for a in arms)  # the run's end came before them
    more = "add --requests, or a longer --deadline (probes were cut or not sent)" if cut else \
        "add --requests"  # fmt: skip
    return (f"the best arm, {record.best}, is best on speed alone: too few probe pairs to show "
            f"its answers unchanged{counts}; not kept — {more}")  # fmt: skip


def _nothing(screening: Screening | None) -> str:
    """What a tune without a level's result measured."""
    if screening is None or not screening.visits:
        return "nothing measured"
    if screening.follow_up is None:
        return "the screening did not finish"
    return "nothing left to tune after the screening"


def _elimination_line(e: Elimination, pair_alpha: float) -> str:
    c = e.comparison
    return (
        f"- {e.arm} dropped after block {e.block}: against {e.lost_to}, the leader then, "
        f"{_pct(c.ratio - 1)} over {c.blocks} blocks, interval {_interval(c)} below 0 "
        f"(each pair at α = {pair_alpha:.2g})"
    )


def _together(tune: LevelTune) -> list[str]:
    """Arms of one rank that no interval ordered: the ties the tune leaves (it never ranks them
    apart)."""
    by_rank: dict[int, list[str]] = {}
    for r in tune.result.ranking:
        by_rank.setdefault(r.rank, []).append(r.arm)
    groups = [arms for arms in by_rank.values() if len(arms) > 1]
    return [f"Not told apart: {', '.join(arms)} (no interval orders them)." for arms in groups]


def _where(metric: TuneMetric, level: int) -> str:
    """``C64``, or ``capacity`` (a tune on capacity: one search per visit)."""
    return metric_where(metric, level)


def _level(tune: LevelTune, metric: TuneMetric) -> list[str]:
    state, result = tune.state, tune.result
    rule = state.rule
    lines = [
        f"### {_where(metric, tune.level)}: {_winner_words(tune)}",
        "",
        f"| rank | arm | status | {METRIC_UNITS[metric]} (geometric mean, blocks) | vs leader | "
        "interval "
        f"({rule.alpha:.2g} family-wise) | shown better than |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result.ranking:
        change, interval = _versus(r.versus_leader)
        lines.append(
            f"| {r.rank} | {r.arm} | {r.status} | {_mean(state, r.arm)} | {change} | {interval} "
            f"| {', '.join(r.better_than) or '—'} |"
        )
    lines += ["", *_together(tune)]
    pair_alpha = rule.pair_alpha(len(state.arms))
    lines += [_elimination_line(e, pair_alpha) for e in result.eliminations]
    if not result.eliminations:
        lines.append("- no arm was dropped")
    equivalent = [r.arm for r in result.ranking if r.status is ArmStatus.EQUIVALENT]
    if equivalent:
        lines.append(
            f"- equivalent to the leader within ±{rule.margin * 100:g}%: {', '.join(equivalent)}"
        )
    return [*lines, ""]


def _left(record: TuneRecord) -> str:
    if record.kept is not None:
        unchecked = "" if record.answers_unchecked is None else ", its answers NOT checked"
        return f"Left live: the best arm, {md_text(record.kept)} (`--keep best`){unchecked}."
    values = ", ".join(f"{k.knob}={show_value(v)}" for k, v in zip(record.knobs, record.original,
                                                                 strict=True))  # fmt: skip
    restored = " (restored and proven live)." if record.restored else "."
    return f"Left as found: {md_text(values)}{restored}"


def _change(x: float) -> str:
    return _pct(math.exp(x) - 1) if math.isfinite(x) else ("+∞" if x > 0 else "−∞")


def _effect_row(e: EffectEstimate) -> str:
    aliased = " = ".join(" × ".join(effect) for effect in e.contrast.effects)
    interval = (f"[{_change(e.low)}, {_change(e.high)}]"
                if math.isfinite(e.low) and math.isfinite(e.high) else "unbounded")  # fmt: skip
    return f"| {aliased} | {_change(e.estimate)} | {interval} | {e.status} |"


def _screened_level(level: LevelEffects, metric: TuneMetric, alpha: float) -> list[str]:
    each = alpha / max(1, len(level.effects))
    return [
        f"#### {_where(metric, level.level)}",
        "",
        f"| contrast (aliased effects) | low → high | interval (each at α = {each:.2g}) | status |",
        "|---|---|---|---|",
        *[_effect_row(e) for e in level.effects],
        "",
    ]


def _design_words(screening: Screening) -> str:
    design = screening.design
    runs, k = len(design.runs), len(design.factors)
    letters = ", ".join(f"{chr(65 + i)} = {f.name}" for i, f in enumerate(design.factors))
    if not design.generators:
        return f"{runs} runs, the full factorial of {k} knobs"
    return (f"{runs} runs, a 2^({k}−{len(design.generators)}) fraction of resolution "
            f"{design.resolution} ({', '.join(design.generators)}; {letters})")  # fmt: skip


def _follow_words(record: TuneRecord, screening: Screening) -> str:
    follow = screening.follow_up
    if follow is None:
        return "The screening did not finish (the time budget ended it): nothing was tuned."
    low = {f.name: f.low for f in screening.design.factors}
    held = ", ".join(f"{n}={show_value(low[n])}" for n in follow.fixed)
    if not follow.factors:
        return ("Every effect is negligible: no knob left to tune, the original values kept "
                f"({held} are the screened knobs' low values).")  # fmt: skip
    pairs = ", ".join(" × ".join(p) for p in follow.interactions)
    with_pairs = f" (interactions not ruled out: {pairs})" if pairs else ""
    rest = f"; held at their low value: {held}" if held else ""
    return (f"Follow-up: a tune of {len(record.arms)} arms over {', '.join(follow.factors)}"
            f"{with_pairs}{rest}.")  # fmt: skip


def _screening(record: TuneRecord) -> list[str]:
    """The screening's contrasts per level and what it left to tune."""
    screening = record.screening
    if screening is None:
        return []
    alpha = record.rule.alpha / max(1, len(record.levels))
    decided = "every contrast decided" if screening.follow_up and screening.follow_up.decided \
        else "some contrast undecided"  # fmt: skip
    lines = [f"### Screening: {_design_words(screening)}; {screening.blocks} block(s), "
             f"{len(screening.visits)} visits, {decided}", ""]  # fmt: skip
    for level in screening.levels:
        lines += _screened_level(level, record.metric, alpha)
    return [
        *lines,
        "Each contrast: the change in the geometric mean from its low to its high sign (a main "
        "effect: the knob's low value to its high one), its anytime-valid interval over the "
        "blocks; active when it excludes 0, negligible inside the margin, else undecided. The "
        "screening's statements hold together with probability at least 1 − α, the tune's too: "
        "both phases' with at least 1 − 2α.",
        "",
        _follow_words(record, screening),
        "",
    ]


def _cost(record: TuneRecord) -> list[str]:
    cost, full = record.cost, record.full_cost
    if cost is None or full is None:
        return []
    screening = record.screening
    phases, design = "", "the full design, every arm"
    if screening is not None:
        phases = (f" (screening {screening.blocks} blocks, {len(screening.visits)} visits; tune "
                  f"{record.blocks} blocks, {len(record.visits)} visits)")  # fmt: skip
        design = f"the full grid's design, every one of its {full.visits // full.rounds} arms"
    priced = "" if math.isnan(full.minutes) else (
        f", ≈{full.minutes:.1f} min (≈{full.gpu_minutes:.1f} GPU-min, priced at the visits "
        "measured)"
    )  # fmt: skip
    budget = " The time budget (`--max-minutes`) ended it." if record.time_budget_hit else ""
    return [
        f"Cost: {cost.rounds} blocks, {cost.visits} visits (co-restarts){phases}, "
        f"{cost.minutes:.1f} min ({cost.gpu_minutes:.1f} GPU-min at {record.gpus} GPU); {design} "
        f"in every one of {full.rounds} blocks: {full.visits} visits{priced}.{budget}"
    ]


def _answers(record: TuneRecord) -> list[str]:
    """Each arm's answers against the answers' baseline arm; the arms dropped for them."""
    if record.answers is None:
        return []
    lines = [
        "Answers (greedy probes inside every visit, against references from the original values):",
        "",
        "| arm | answers | differ from reference | wrong | structural failures | recall "
        "| top-1 agreement | against its baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    dropped = set(record.dropped or ())
    if record.answers:
        base = record.answers[0].baseline
        lines.append(f"| {base.arm} (baseline) {arm_answers_cells(base)} — |")
    for j in record.answers:
        gone = " **dropped**" if j.candidate.arm in dropped else ""
        lines.append(f"| {j.candidate.arm}{gone} {arm_answers_cells(j.candidate)} "
                     f"{answers_phrase(j)} |")  # fmt: skip
    return [*lines, ""]


def _slo(record: TuneRecord) -> str:
    return "" if record.slo is None else f" under the SLO {record.slo}"


def tune_markdown(record: TuneRecord) -> str:
    """The tune: per concurrency the ranking, the eliminations and the stop; then the agreed
    best, how the knobs were left, the method and the cost."""
    knobs = ", ".join(f"{md_text(k.service)} {md_code(k.knob)}" for k in record.knobs)
    rule = record.rule
    arms = f"{len(record.arms)} arms" if record.screening is None else \
        f"screened, {len(record.arms)} arms followed up"  # fmt: skip
    lines = [f"## tune {knobs}: {arms}", "", f"**{headline(record)}**", "", *_screening(record)]
    for tune in record.tunes:
        lines += _level(tune, record.metric)
    best = (
        "Best at every level (the winner, or equivalent to it, at each): "
        f"**{md_text(record.best)}**."
        if record.best is not None
        else "No arm is best at every level (a level made no claim, or their winners differ)."
    )
    method = record.tunes[0].result.method if record.tunes else ""
    lines += [
        best,
        _left(record),
        "",
        *_answers(record),
        f"{METRIC_WORDS[record.metric]}{_slo(record)} per visit; blocks in a seeded "
        f"{rule.order} order (seed {rule.seed}); {method or 'successive elimination'}, "
        f"at α = {rule.alpha:g} family-wise "
        f"(split over {len(record.levels)} level(s)), margin ±{rule.margin * 100:g}%, "
        f"{rule.boundary} boundary, at most {rule.max_rounds} blocks.",
        "",
        *_cost(record),
    ]
    return "\n".join(lines) + "\n"


def tune_json(record: TuneRecord, files: Sequence[str] = (), ok: bool = True) -> str:
    """``tune --json``: ``ok`` (the exit code is 0), the record as the ledger stores it, its
    headline, and the files."""
    doc = {"ok": ok, **encode(record), "headline": headline(record), "files": list(files)}
    return json_text(doc)


def tune_png(record: TuneRecord) -> bytes:
    """Each concurrency's values per block, one line per arm (PNG bytes)."""
    knobs = ", ".join(k.knob for k in record.knobs)
    title = f"tune #{record.tune_id}: {knobs}" if record.tune_id else f"tune: {knobs}"
    return tune_plot([(t.level, t.state) for t in record.tunes], title=title,
                     unit=METRIC_AXES[record.metric])  # fmt: skip


def plan_markdown(plan: TunePlan) -> str:
    """``tune --plan``: per concurrency the recorded noise and the rule simulated on it."""
    lines = [
        f"## tune plan: {plan.arms} arms, one better by {_pct(plan.effect)}",
        "",
        f"Noise from {len(plan.ab_ids)} recorded A/B(s); {plan.runs} seeded simulated tunes per "
        "level (the rule as configured, one arm better by the effect, the others equal).",
        "",
        "| C | SD per-block log ratio | mean blocks | mean visits (full design) | stopped "
        "(best / within margin / budget) | wrong winner |",
        "|---|---|---|---|---|---|",
    ]
    for level in plan.levels:
        c = level.check
        if c is None:
            lines.append(f"| {level.level} | no recorded noise | — | — | — | — |")
            continue
        o = c.outcomes
        lines.append(
            f"| {level.level} | {level.sd_log_ratio * 100:.2f}% | {c.mean_blocks:.1f} "
            f"| {c.mean_visits:.1f} ({c.full_visits}) | {o[TuneOutcome.BEST]} / "
            f"{o[TuneOutcome.WITHIN_MARGIN]} / {o[TuneOutcome.BUDGET]} "
            f"| {c.errors[Misclaim.WRONG_WINNER]}/{c.runs} |"
        )
    if plan.over_budget is not None:
        lines += ["", over_budget_phrase(plan.over_budget)]
    return "\n".join(lines) + "\n"


def _arms(counts: Sequence[int]) -> str:
    """The product of ``counts``, exact up to 10^15, else its power of ten (never the digits of
    a product of thousands of knobs)."""
    total = 1
    for n in counts:
        total *= n
        if total > 10**15:
            return f"about 10^{math.floor(sum(math.log10(c) for c in counts))}"
    return f"{total:,}"


def too_many_arms(counts: Sequence[int], cap: int) -> str:
    """``tune --knob``'s grid past :data:`~servelab.core.ab.tunerun.MAX_ARMS`: its arms (the
    product of the knobs' value counts), the cap, and how to narrow it."""
    shown = " × ".join(f"{n:,}" for n in counts[:6]) + (" × …" if len(counts) > 6 else "")
    return (f"{_arms(counts)} arms ({shown} values), more than a tune takes ({cap:,}): every "
            "arm is a co-restart in every block. Narrow the grid: fewer values per --knob, fewer "
            "knobs per tune, or --screen first (up to 8 knobs at two values each)")  # fmt: skip
