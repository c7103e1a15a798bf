"""Answers in words: the phrase beside a speed-up (``answers unchanged: 0 of 480 against 0 of
480``), the refusal ``ab`` prints, and the per-arm table with a few differing answers beside
their references (model text made safe for a markdown table; the HTML pages escape it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import assert_never

from servelab.core.ab.compare import Comparison, Verdict
from servelab.core.answers.contract import AnswersUnchecked, ArmAnswers, Example
from servelab.core.answers.judge import AnswersJudgement
from servelab.core.answers.rule import AnswersOutcome, AnswersVerdict

__all__ = [
    "answers_lines",
    "answers_phrase",
    "answers_refusal",
    "arm_answers_cells",
    "safe_text",
    "unchecked_phrase",
    "unkeepable_phrase",
]


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x * 100:.1f}%"


def _rates(v: AnswersVerdict) -> tuple[str, str, str]:
    """The candidate's wrong rate with its interval, and the baseline's."""
    n = max(v.n, 1)
    cand = _pct(v.candidate_wrong / n)
    base = _pct(v.baseline_wrong / n)
    diff = f"[{v.low * 100:+.1f}, {v.high * 100:+.1f}] points" if v.n else "[n/a]"
    return cand, diff, base


def _cut_note(j: AnswersJudgement) -> str:
    """The probes cut by the run's end, left out of the judgement (empty: none)."""
    cut = j.baseline.cut + j.candidate.cut
    return f" ({cut} probes cut by the run's end, not judged)" if cut else ""


def answers_phrase(j: AnswersJudgement) -> str:
    """What the answers say, in a few words (the perf plan's headline carries it); answers
    not checked when no probe of the candidate was judged (all cut by the run's end, or none
    sent), not compared when no probe was judged in both arms: under the gate a candidate so
    left is not kept on its speed alone unless its own answers show no sign of a change."""
    v = j.verdict
    if v.n == 0:
        unchecked = [a for a in (j.baseline, j.candidate) if a.unchecked]
        cut = " and ".join(a.arm for a in unchecked if a.cut)
        unsent = " and ".join(a.arm for a in unchecked if not a.cut)
        why = [f"every probe of {cut} was cut by the run's end"] if cut else []
        why += [f"no probe of {unsent} was sent before the run's end"] if unsent else []
        why = why or ["no probe was judged in both arms"]
        verdict = "not kept on its speed alone" if j.unshown else "the verdict is on speed alone"
        if j.candidate.unchecked:
            return f"answers NOT checked ({'; '.join(why)}): {verdict}"
        judged = [f"{a.arm}: {a.wrong} of {a.answers} wrong"  # against the references
                  for a in (j.baseline, j.candidate) if not a.unchecked]  # fmt: skip
        return f"answers NOT compared ({'; '.join(why + judged)}): {verdict}"
    return _outcome_phrase(j) + _cut_note(j)


def _outcome_phrase(j: AnswersJudgement) -> str:
    v = j.verdict
    counts = f"{v.candidate_wrong} of {v.n} against {v.baseline_wrong} of {v.n}"
    cand, diff, base = _rates(v)
    match v.outcome:
        case AnswersOutcome.UNCHANGED:
            return f"answers unchanged: {counts}"
        case AnswersOutcome.CHANGED:
            return (f"changes answers: {cand} {diff} against {base} for the baseline "
                    f"(p = {v.p:.2g})")  # fmt: skip
        case AnswersOutcome.FEWER:
            return f"fewer wrong answers: {cand} {diff} against {base} for the baseline"
        case AnswersOutcome.INCONCLUSIVE:
            held = ": not kept on its speed alone" if j.unshown else ""
            c, b = j.candidate, j.baseline  # each arm's own, where some were not paired
            own = f" ({c.wrong} of {c.answers} against {b.wrong} of {b.answers} of all judged)"
            own = "" if c.answers == b.answers == v.n else own
            return (f"answers inconclusive: {counts} wrong{own}, at least {v.min_pairs} paired "
                    f"probes needed{held}")  # fmt: skip


def _faster(comparisons: Sequence[Comparison]) -> float | None:
    better = [c.change for c in comparisons if c.verdict == Verdict.BETTER]
    return max(better) if better else None


def answers_refusal(result: object) -> str:
    """``faster by X% but changes answers: Y% [interval] against Z% for the baseline`` (or
    without the speed when it was not faster). ``result``: an A/B result with ``answers``."""
    judged: AnswersJudgement | None = getattr(result, "answers", None)
    if judged is None:
        return ""
    cand, diff, base = _rates(judged.verdict)
    changes = f"changes answers: {cand} {diff} against {base} for the baseline"
    faster = _faster(getattr(result, "comparisons", ()))
    lead = f"faster by {faster * 100:.1f}% but " if faster is not None else ""
    return f"{lead}{changes}: not kept"


def safe_text(text: str, limit: int = 120) -> str:
    """Model text for one markdown table cell: no cell breaks, no code spans, no line ends
    (the page's HTML escapes the rest)."""
    flat = " ".join(text.split())
    flat = flat.replace("|", "¦").replace("`", "'").replace("\\", "/")
    return (flat[:limit] + "…") if len(flat) > limit else flat or "(empty)"


def arm_answers_cells(a: ArmAnswers) -> str:
    """``| answers | differ | wrong | failures | recall | top-1 |`` cells of one arm (the probes
    cut by the run's end beside the answers judged)."""
    failures = ", ".join(f"{code} {n}" for code, n in a.failures) or "none"
    recall = f"{a.recalled}/{a.retrieval}" if a.retrieval else "—"
    top1 = "—" if a.top1_agree is None else _pct(a.top1_agree)
    answers = f"{a.answers} (+{a.cut} cut, not judged)" if a.cut else str(a.answers)
    return f"| {answers} | {a.differ} | {a.wrong} | {failures} | {recall} | {top1} |"


def _example_row(e: Example) -> str:
    failures = ", ".join(e.failures) or "differs"
    return (f"| {e.probe} | C{e.level} | {safe_text(e.answer)} | {safe_text(e.reference)} "
            f"| {failures} |")  # fmt: skip


def answers_lines(j: AnswersJudgement) -> list[str]:
    """The answers section: each arm's answers, the rule's verdict, and a few wrong answers of
    the candidate next to their references."""
    v = j.verdict
    lines = [
        f"### Answers ({j.mode}): {answers_phrase(j)}",
        "",
        "| arm | answers | differ from reference | wrong | structural failures | recall "
        "| top-1 agreement |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in (j.baseline, j.candidate):
        lines.append(f"| {arm.arm} {arm_answers_cells(arm)}")
    lines += [
        "",
        f"{j.probes} probe requests beside {j.requests} load requests ({_pct(j.share)} of all); "
        f"{v.n} pairs by prompt, {v.candidate_only} wrong only with the candidate, "
        f"{v.baseline_only} only with the baseline; {v.method}; α = {v.alpha}, "
        f"p = {v.p:.3g}; references {j.references if j.references is not None else 'not stored'}.",
    ]
    shown = j.candidate.examples or j.baseline.examples
    if shown:
        lines += ["", "| probe | at | answer | reference | why |", "|---|---|---|---|---|"]
        lines += [_example_row(e) for e in shown]
    return [*lines, ""]


def unchecked_phrase(why: AnswersUnchecked) -> str:
    """Why answers asked for were not checked, said where the verdict would stand."""
    return f"answers NOT checked ({_unchecked_reason(why)}): the verdict is on speed alone"


def unkeepable_phrase(option: str, why: AnswersUnchecked) -> str:
    """Why ``--answers gate`` refuses ``option`` (``--keep better``) before anything runs: it
    may leave a candidate live, the gate leaves one live only once its answers are shown
    unchanged, and no answers can be checked here; then what to do instead."""
    return (f"{option} is refused: under --answers gate a candidate is left live only when its "
            f"answers are shown unchanged, and no answers can be checked here "
            f"({_unchecked_reason(why)}). {_checkable(why)}, or use --answers check to keep "
            "on speed alone (its answers reported as unchecked)")  # fmt: skip


def _checkable(why: AnswersUnchecked) -> str:
    """What lets answers be checked, said to the user who cannot check them."""
    match why:
        case AnswersUnchecked.TOO_FEW_REQUESTS:
            return "Add --requests (19 or more per run) so each run carries a probe"
        case AnswersUnchecked.TRACE:
            return "Measure a generated load instead of the trace (it carries probes)"
        case AnswersUnchecked.CAPACITY:
            return "Compare on --metric throughput or goodput (their runs carry probes)"
        case _ as never:
            assert_never(never)


def _unchecked_reason(why: AnswersUnchecked) -> str:
    match why:
        case AnswersUnchecked.TOO_FEW_REQUESTS:
            return "a run's --requests cannot carry one probe within its 5% share"
        case AnswersUnchecked.TRACE:
            return "a replayed trace carries no probes"
        case AnswersUnchecked.CAPACITY:
            return "a capacity search carries no probes"
        case _ as never:
            assert_never(never)
