"""An investigation's state in words: how it ended, its root cause, the slowdown against its
baseline, and the line a case's timeline shows for each recorded ``investigate`` event (no I/O).

Kept apart from :mod:`servelab.report.investigate` (the loop's progress, its closing lines and
the incident report) so the case pages (:mod:`servelab.report.docs`) word a stored state without
importing the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from servelab.core.case.abtest import AbTestRecord
from servelab.core.investigate.slow import (
    MIN_BASELINE_RUNS,
    MIN_REQUESTS_PER_SLOT,
    Slowdown,
    SlowPoint,
    SmallBaseline,
)
from servelab.core.investigate.state import Decided, Ending, InvestigationState, Stage, Symptom
from servelab.report.text import arm_value

__all__ = [
    "NO_BASELINE",
    "describe_ab_test",
    "describe_how",
    "describe_investigation",
    "describe_layer",
    "describe_slowdown",
    "describe_small",
    "describe_state",
    "no_baseline",
    "root_cause",
]

NO_BASELINE = "no baseline recorded: run `servelab bench` when it is good"
#: What a usable baseline takes (:func:`servelab.core.investigate.slow.usable`).
_USABLE = (f"at least {MIN_BASELINE_RUNS} runs a level (`--repeat`) and "
           f"{MIN_REQUESTS_PER_SLOT} requests a run per slot of its concurrency")  # fmt: skip

_LAYERS = {
    "client_proxy": "the client-side proxy in front of the router",
    "client": "the client",
    "router": "the router",
    "prefill": "the prefill",
    "decode_transfer": "the decode and its KV-transfer path",
    "engine_wedge": "a wedged engine",
    "correctness": "the answers (correctness)",
    "engine_saturation": "a saturated engine",
    "pd_pair": "the prefill/decode pair's hand-off settings",
}
_SYMPTOMS = {Symptom.HANG: "sessions hang", Symptom.SLOW: "slower",
             Symptom.ANSWERS: "answers change"}  # fmt: skip


def describe_layer(layer: str | None, worker: str | None = None) -> str:
    text = _LAYERS.get(layer or "", layer or "no layer named")
    return f"{text} ({worker})" if worker else text


def describe_small(small: SmallBaseline) -> str:
    """A recorded bench or A/B too small to compare with, and why."""
    what = f"A/B #{small.ab_id}" if small.ab_id is not None else "bench runs " + ", ".join(
        f"#{i}" for i in small.run_ids)  # fmt: skip
    why = [f"{small.runs} run(s) at a level"] if small.runs < MIN_BASELINE_RUNS else []
    if small.requests is not None and small.concurrency is not None and (
            small.requests < MIN_REQUESTS_PER_SLOT * small.concurrency):  # fmt: skip
        why.append(f"{small.requests} request(s) a run at C{small.concurrency}")
    return f"{what} ({small.at[:16]}: {', '.join(why) or 'too small'})"


def no_baseline(small: Sequence[SmallBaseline] | None) -> str:
    """Why there is nothing to compare with: none recorded, or each too small (and what a
    usable one takes)."""
    if not small:
        return NO_BASELINE
    named = "; ".join(describe_small(b) for b in small[:3])
    more = f" and {len(small) - 3} more" if len(small) > 3 else ""
    return (f"no usable baseline: {named}{more} too small to compare with; run `servelab bench` "
            f"with {_USABLE} when it is good")  # fmt: skip


def _not_reproduced(state: InvestigationState) -> str:
    symptom = _SYMPTOMS[state.symptom]
    if state.ending is Ending.NO_BASELINE:
        return f"did not reproduce ({symptom}): nothing to compare with: " + no_baseline(
            state.small_baselines)  # fmt: skip
    if state.ending is Ending.INCONCLUSIVE:
        return (f"inconclusive ({symptom}): {describe_slowdown(state.slowdown)}; neither "
                "reproduced nor shown absent: measure again with more runs")  # fmt: skip
    if state.slowdown is not None:
        tried = describe_slowdown(state.slowdown)
    elif state.soak_id is not None:
        tried = f"soak #{state.soak_id} had no failed session"
    else:
        tried = "runs " + ", ".join(f"#{i}" for i in state.run_ids) + " answered as the references"
    return f"did not reproduce ({symptom}): {tried}; nothing to chase"


def root_cause(state: InvestigationState) -> str:
    """The case's root cause: the convicted targets and the layer localized (a symptom that did
    not reproduce: that, and what was tried)."""
    if state.ending in (Ending.NOT_REPRODUCED, Ending.NO_BASELINE, Ending.INCONCLUSIVE):
        return _not_reproduced(state)
    where = describe_layer(state.layer, state.worker)
    if state.layer is None and state.symptom is Symptom.SLOW:
        where = "the serving path (a bench names no layer)"
    if state.convicted:
        return f"{', '.join(state.convicted)} (by experiment); localized to {where}"
    return f"localized to {where}; no recorded change convicted by experiment"


def describe_how(d: Decided) -> str:
    ref = f" (evidence #{d.evidence_id})" if d.evidence_id is not None else ""
    p = f", p={d.p_value:.3g}" if d.p_value is not None else ""
    return f"{d.outcome} by {d.by}{p}{ref}"


def describe_state(state: InvestigationState) -> str:
    """One line: how it ended, or where it stands."""
    match state.ending:
        case Ending.NOT_REPRODUCED:
            return f"case {state.case_id}: the symptom did not reproduce; nothing convicted"
        case Ending.NO_BASELINE:
            return f"case {state.case_id}: {no_baseline(state.small_baselines)}"
        case Ending.INCONCLUSIVE:
            return (f"case {state.case_id}: inconclusive: the comparison with the baseline "
                    "decided nothing; nothing convicted")  # fmt: skip
        case Ending.RESOLVED | Ending.UNEXPLAINED:
            return f"case {state.case_id}: {root_cause(state)}"
        case None:
            return f"case {state.case_id}: stopped at {state.stage}"
        case _:
            assert_never(state.ending)


def _point(p: SlowPoint) -> str:
    return (f"C{p.concurrency} now/baseline {p.ratio:.3f} [{p.low:.3f}, {p.high:.3f}] "
            f"(Fieller 95%, n={p.n_now}/{p.n_baseline}): {p.verdict}")  # fmt: skip


def describe_slowdown(s: Slowdown | None, small: Sequence[SmallBaseline] | None = None) -> str:
    """The reproduction of a slowdown against its baseline (the newer ones passed over named),
    or why there is none (``small``: the recorded ones too small to compare with)."""
    if s is None:
        return no_baseline(small)
    runs = ", ".join(f"#{i}" for i in s.baseline_ids)
    label = f" {s.baseline_label!r}" if s.baseline_label else ""
    word = "slower" if s.slower else "inconclusive" if s.inconclusive else "not slower"
    points = "; ".join(_point(p) for p in s.points) or "no concurrency measured on both"
    passed = "" if not s.skipped else (
        " (passed over, too small to compare with: "
        + "; ".join(describe_small(b) for b in s.skipped[:3]) + ")")  # fmt: skip
    return (f"against baseline bench{label} (runs {runs}, {s.baseline_at[:16]}){passed}: "
            f"{word}: {points}")  # fmt: skip


def describe_investigation(state: InvestigationState) -> str:
    """A recorded ``investigate`` event in a case's timeline: where it stands (or how it ended),
    the slowdown once reproduced, the verdicts so far, the reverts and the restore."""
    done = state.stage is Stage.DONE
    parts = [describe_state(state).split(": ", 1)[1] if done else f"next: {state.stage}"]
    if state.slowdown is not None and (done or state.stage is Stage.LOCALIZE):
        parts.append(describe_slowdown(state.slowdown))
    parts += [f"{d.target} {d.outcome} by {d.by}" for d in state.decided]
    parts += [f"reverted {t} (convicted)" for t in state.reverted]
    if state.restored is not None:
        parts.append("restore plan carried out, verified live" if state.restored
                     else "restore plan NOT carried out")  # fmt: skip
    return f"investigate ({_SYMPTOMS[state.symptom]}): " + "; ".join(parts)


def describe_ab_test(t: AbTestRecord) -> str:
    """A slowdown's A/B test of a change in a case's timeline."""
    points = "; ".join(
        f"C{p.concurrency} revert/change {p.ratio:.3f} [{p.low:.3f}, {p.high:.3f}]: {p.verdict}"
        for p in t.points
    )
    return (f"ab test {t.target} ({arm_value(t.suspect_value)} against "
            f"{arm_value(t.revert_value)}, A/B #{t.ab_id}): "
            f"{t.outcome.upper()}; {points or 'nothing measured'}; restoring needs "
            f"{t.restore:.3f}")  # fmt: skip
