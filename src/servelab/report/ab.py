"""Rendering an A/B result (:class:`~servelab.core.ab.result.AbResult`, live or read back from the
ledger): the perf-plan markdown (``+12.8% at C64``), the visits in the order they ran, paired
against unpaired, the stopping rule and its cost, a plot; and ``ab --plan``."""

from __future__ import annotations

import math
import statistics
from typing import assert_never

from servelab.core.ab.compare import Anomaly, Comparison, Verdict
from servelab.core.ab.crosscheck import RATIO_TOLERANCE, ServerDisagreement, server_ratios
from servelab.core.ab.design import Noise, Order
from servelab.core.ab.result import AbDesign, AbResult, NotKept
from servelab.ops.ab.plan import AbPlan
from servelab.report.answers import answers_lines, answers_phrase, unchecked_phrase
from servelab.report.metric import METRIC_UNITS, METRIC_WORDS, metric_where
from servelab.report.plots import ab_plot
from servelab.report.text import level_label, md_code, md_text

__all__ = [
    "ab_markdown", "ab_png", "change_phrase", "headline", "not_kept_phrase", "plan_markdown",
]  # fmt: skip


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:+.1f}%"


def _where(design: AbDesign, conc: int) -> str:
    """``C64``, ``trace`` (a replay's one level) or ``capacity`` (an A/B on capacity)."""
    return metric_where(design.compared, conc)


def change_phrase(c: Comparison, design: AbDesign | None = None) -> str:
    """``+12.8% at C64`` for a significant change, ``+1.2% at C80 (n.s.)`` otherwise (``in
    capacity`` for an A/B on capacity)."""
    tail = {Verdict.NO_DIFFERENCE: " (n.s.)", Verdict.INCONCLUSIVE: " (inconclusive)"}.get(
        c.verdict, ""
    )
    where = level_label(c.concurrency) if design is None else _where(design, c.concurrency)
    return f"{_pct(c.change)} {'in' if where == 'capacity' else 'at'} {where}{tail}"


def headline(result: AbResult) -> str:
    """One line: what the candidate did against the baseline at every concurrency (and what
    was compared, when not throughput)."""
    phrases = ", ".join(change_phrase(c, result.design) for c in result.comparisons)
    design = result.design
    on = "" if design.metric is None else f" ({design.metric} under {design.slo})"
    head = f"{result.service} {result.knob} {result.baseline} → {result.candidate}{on}"
    answers = "" if result.answers is None else f", {answers_phrase(result.answers)}"
    if result.answers_unchecked is not None:
        answers = f", {unchecked_phrase(result.answers_unchecked)}"
    return f"{head}: {phrases or 'no comparison'}{answers}"


def not_kept_phrase(result: AbResult) -> str:
    """Why the value ``--keep`` named was not left live, and what was instead ("" when it was,
    or none was named)."""
    back = "the original value put back" if result.restored else "nothing put back"
    match result.not_kept:
        case None:
            return ""
        case NotKept.ANSWERS_CHANGED | NotKept.ANSWERS_UNSHOWN:
            said = "" if result.answers is None else f", and here {answers_phrase(result.answers)}"
            return (f"--keep: the candidate {result.candidate} is NOT kept: under --answers gate "
                    f"a candidate is left live only when its answers are shown unchanged{said}; "
                    f"{back}")  # fmt: skip
        case NotKept.PAIR_FAILED:
            return f"--keep: NOT kept: the arm's pair layer failed in a visit; {back}"
        case _ as unreachable:
            assert_never(unreachable)


def _interval(lo: float, hi: float) -> str:
    if math.isnan(lo) or math.isnan(hi) or math.isinf(lo) or math.isinf(hi) or lo <= 0:
        return "unbounded"
    return f"[{_pct(lo - 1)}, {_pct(hi - 1)}]"


def _ci(c: Comparison) -> str:
    return _interval(*c.ci)


def _arm_mean(result: AbResult, arm: str, conc: int) -> str:
    values = result.throughput(arm).get(conc, ())
    return f"{sum(values) / len(values):.1f} (n={len(values)})" if values else "—"


def _order_words(result: AbResult) -> str:
    if result.design.order == Order.ABBA:
        return (
            f"ABBA: rounds alternate {result.baseline}→{result.candidate} and "
            f"{result.candidate}→{result.baseline}"
        )
    return f"random: each round's order a fair coin (seed {result.design.order_seed})"


def _visits_table(result: AbResult) -> list[str]:
    levels = list(result.design.concurrencies)
    lines = [
        f"Visits in the order they ran ({_order_words(result)}):",
        "",
        "| # | round | order | arm | verification | "
        + " | ".join(_where(result.design, c) for c in levels)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(levels),
    ]
    for i, v in enumerate(result.visits, 1):
        thr = " | ".join(f"{v.throughput[c]:.1f}" if c in v.throughput else "—" for c in levels)
        lines.append(
            f"| {i} | {v.round + 1} | {v.order} | {md_text(f'{result.knob}={v.arm}')} "
            f"| {v.verification_id} "
            f"| {thr} |"
        )
    return lines


def _disagreement_line(result: AbResult, flag: ServerDisagreement) -> str:
    verdict = next(
        (c.verdict for c in result.comparisons if c.concurrency == flag.concurrency), "—"
    )
    return (
        f"- **client and servers disagree at C{flag.concurrency}** (verdict: {verdict}): the "
        f"client's ratio is {_pct(flag.client_ratio - 1)}, the decodes' own counters "
        f"{_pct(flag.server_ratio - 1)}; they differ by {abs(flag.difference) * 100:.1f}%, more "
        f"than the {flag.tolerance * 100:g}% tolerance. A client-side artefact may be passing "
        "for a knob effect (or hiding one): do not act on this verdict until they agree."
    )


def _server_table(result: AbResult) -> list[str]:
    """The servers' own view of each arm next to the client's, so a client-side artefact cannot
    pass for a knob effect; each concurrency whose two ratios disagree beyond the tolerance
    (:mod:`servelab.core.ab.crosscheck`) is flagged, with both values and the verdict."""
    levels = [
        c
        for c in result.design.concurrencies
        if any(c in v.server_throughput for v in result.visits)
    ]
    if not levels:
        return []
    lines = [
        "What the decodes counted (output tok/s from their own counters over each whole run) "
        "against the client (steady state):",
        "",
        "| C | server ratio | client ratio | " + " | ".join(
            md_text(f"{result.knob}={arm}") + " server tok/s"
            for arm in (result.baseline, result.candidate))
        + f" | client and servers (±{RATIO_TOLERANCE * 100:g}%) |",
        "|---|---|---|---|---|---|",
    ]  # fmt: skip
    flags = {f.concurrency: f for f in result.server_disagreements}
    base_arm, cand_arm = (
        result.server_throughput(result.baseline),
        result.server_throughput(result.candidate),
    )
    ratios = server_ratios(base_arm, cand_arm)
    for c in levels:
        means = [statistics.fmean(arm[c]) if arm.get(c) else None for arm in (base_arm, cand_arm)]
        server = _pct(ratios[c] - 1) if c in ratios else "—"
        client = next((_pct(x.change) for x in result.comparisons if x.concurrency == c), "—")
        cells = " | ".join("—" if v is None else f"{v:.1f}" for v in means)
        agree = "DISAGREE" if c in flags else "agree" if c in ratios and client != "—" else "—"
        lines.append(f"| {c} | {server} | {client} | {cells} | {agree} |")
    lines += ["", *(_disagreement_line(result, flags[c]) for c in levels if c in flags)]
    return [*lines, ""] if flags else lines


def _analyses_table(result: AbResult) -> list[str]:
    lines = [
        "What pairing bought (candidate/baseline; the verdict is the paired t interval):",
        "",
        "| C | paired: rounds, ratio, 95% t CI | bootstrap 95% CI | unpaired (Fieller) ratio, "
        "95% CI | stopping rule's interval (95% at every look) | stopping rule |",
        "|---|---|---|---|---|---|",
    ]
    for c in result.comparisons:
        p, u, s = c.paired, c.unpaired, c.sequential
        paired = f"n={p.n}, {_pct(p.ratio - 1)} {_interval(*p.ci)}" if p else "—"
        boot = _interval(*p.bootstrap_ci) if p and p.bootstrap_ci else "—"
        unpaired = f"{_pct(u.ratio - 1)} {_interval(u.low, u.high)}" if u else "—"
        cs = _interval(*s.ratio_ci) if s else "—"
        decided = result.design.decided.get(c.concurrency)
        rounds, decision = (decided.rounds, decided.decision) if decided else (None, c.decision)
        at = f" at round {rounds}" if rounds else ""
        where = _where(result.design, c.concurrency)
        lines.append(f"| {where} | {paired} | {boot} | {unpaired} | {cs} | {decision}{at} |")
    first = next((c.paired for c in result.comparisons if c.paired), None)
    if first is not None and first.bootstrap_method:
        lines += ["", f"Bootstrap: {first.bootstrap_method}."]
    return lines


def _rule_words(design: AbDesign) -> str:
    if design.looks is None:
        return "Lai (1976) confidence sequence (any number of looks)"
    return (
        f"Pocock repeated confidence intervals on Student's t (Jennison & Turnbull 1989), "
        f"looks at rounds 3..{design.looks}"
    )


def _stopping(design: AbDesign) -> list[str]:
    cost, fixed = design.cost, design.fixed_cost
    lines = []
    if design.until_decided:
        margin = f", equivalence margin ±{design.margin * 100:g}%" if design.margin else ""
        lines.append(
            f"Stopping rule: {_rule_words(design)} on the per-round log ratio, 95% at every "
            f"look{margin}; {design.rounds_run} of at most {design.max_rounds} rounds "
            f"({design.stopped})."
        )
    if cost is not None and fixed is not None and not math.isnan(fixed.minutes):
        lines.append(
            f"Cost: {cost.rounds} rounds, {cost.visits} visits, {cost.minutes:.1f} min "
            f"({cost.gpu_minutes:.1f} GPU-min at {design.gpus} GPU); the fixed design of "
            f"{fixed.rounds} rounds at every concurrency: {fixed.visits} visits, "
            f"≈{fixed.minutes:.1f} min (≈{fixed.gpu_minutes:.1f} GPU-min, estimated from the "
            "visits measured)."
        )
    return lines


def _anomaly_line(knob: str, a: Anomaly) -> str:
    lo, hi = a.drop_ci
    ci = "n/a" if math.isnan(lo) else f"{lo * 100:.1f}% .. {hi * 100:.1f}%"
    head = "anomaly" if a.significant else "not flagged (not significant)"
    return (
        f"- {head}: with {md_text(f'{knob}={a.arm}')}, throughput at C{a.concurrency} "
        f"({a.throughput:.1f} tok/s, n={a.n}) is {a.drop * 100:.1f}% below C{a.previous} "
        f"({a.previous_throughput:.1f} tok/s, n={a.n_previous}); drop 90% CI {ci}, "
        f"Welch one-sided p={a.p_value:.3g}"
    )


def ab_markdown(result: AbResult) -> str:
    """The perf-plan table: per concurrency both arms' mean throughput, change, CI, verdict;
    then the visits, the three analyses, the stopping rule's cost and the anomalies."""
    knob, baseline, candidate = result.knob, result.baseline, result.candidate
    design = result.design
    unit = METRIC_UNITS[design.compared]
    slo = f" under the SLO {design.slo}" if design.slo else ""
    lines = [
        f"## {md_text(result.service)} {md_code(knob)}: {md_text(f'{baseline} → {candidate}')}",
        "",
        f"**{headline(result)}**",
        "",
        *([f"**{md_text(not_kept_phrase(result))}**", ""] if result.not_kept is not None else []),
        f"| C | {md_text(f'{knob}={baseline}')} {unit} | {md_text(f'{knob}={candidate}')} {unit} "
        "| change | 95% CI | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in result.comparisons:
        lines.append(
            f"| {_where(design, c.concurrency)} | {_arm_mean(result, baseline, c.concurrency)} "
            f"| {_arm_mean(result, candidate, c.concurrency)} | {_pct(c.change)} "
            f"| {_ci(c)} | {c.verdict} |"
        )
    lines += [
        "",
        f"{METRIC_WORDS[design.compared]}{slo}, candidate/baseline; "
        f"{result.comparisons[0].method if result.comparisons else ''}.",
        "",
        *_visits_table(result),
        "",
        *([] if result.answers is None else answers_lines(result.answers)),
        *_server_table(result),
        *_analyses_table(result),
        "",
        *_stopping(result.design),
        "",
    ]
    lines += [_anomaly_line(knob, a) for a in result.design.drops]
    if not result.anomalies:
        lines.append(
            "- no anomaly: no significant drop of throughput with concurrency in either arm"
        )
    return "\n".join(lines) + "\n"


def plan_markdown(plan: AbPlan) -> str:
    """``ab --plan``: the noise found and the rounds each design needs."""
    knob = f" {md_code(plan.knob)}" if plan.knob else ""
    lines = [
        f"## A/B plan: {plan.service}{knob}, change {_pct(plan.effect)}, power {plan.power:g}, "
        f"α {plan.alpha:g}",
        "",
        f"Noise from {len(plan.ab_ids)} recorded A/B(s) of {plan.service}: pooled within-arm SD "
        "of ln throughput across visits; the per-round log ratio's SD is the pooled SD of the "
        "recorded rounds' log ratios where they give 2 df or more, else √2 times the arm's.",
        "",
        "| C | arms (df) | SD ln thr | fixed design rounds (power) | until-decided rounds for "
        "that power (mean) | SD per-round log ratio used |",
        "|---|---|---|---|---|---|",
    ]
    for noise, fixed, seq in zip(plan.noise, plan.fixed, plan.sequential, strict=True):
        if math.isnan(noise.sd_log):
            lines.append(f"| {noise.concurrency} | 0 | no recorded noise | — | — | — |")
            continue
        f_rounds = f"{fixed.rounds} ({fixed.achieved_power:.2f})" if fixed.rounds else "> 200"
        s_rounds = f"{seq.rounds}" if seq.rounds else f"> {plan.max_rounds}"
        lines.append(
            f"| {noise.concurrency} | {noise.groups} ({noise.df}) | {noise.sd_log * 100:.2f}% "
            f"| {f_rounds} | {s_rounds} ({seq.mean_rounds:.1f}) | {_ratio_sd(noise)} |"
        )
    lines += _plan_equivalence(plan)
    lines += [
        "",
        "Fixed design: two-sided paired t-test on log ratios, power by the noncentral t. "
        f"Until-decided: {plan.sequential[0].sims if plan.sequential else 0} seeded simulations "
        f"of the stopping rule ({plan.boundary}, max {plan.max_rounds} rounds).",
    ]
    return "\n".join(lines) + "\n"


def _ratio_sd(noise: Noise) -> str:
    if noise.paired_df >= 2 and not math.isnan(noise.paired_sd):
        return f"{noise.sd_log_ratio * 100:.2f}% (measured, df {noise.paired_df})"
    return f"{noise.sd_log_ratio * 100:.2f}% (√2 bound)"


def _plan_equivalence(plan: AbPlan) -> list[str]:
    if not plan.equivalence or plan.margin is None:
        return []
    cells = ", ".join(
        f"C{e.concurrency} {e.rounds if e.rounds else '> 200'}" for e in plan.equivalence
    )
    fixed = plan.fixed_rounds
    return [
        "",
        f"Fixed design rounds to call a true 0 equivalent within ±{plan.margin * 100:g}% "
        f"(95% t interval inside the margin, TOST) with power {plan.power:g}: {cells}. The fixed "
        f"design that gives either verdict at every concurrency: "
        f"{fixed if fixed is not None else 'more than 200'} rounds.",
    ]


def ab_png(result: AbResult) -> bytes:
    """Throughput against concurrency for both arms (PNG bytes)."""
    return ab_plot(result, title=f"A/B #{result.ab_id}: {result.service} {result.knob}")
