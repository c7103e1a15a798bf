"""The words of ``servelab investigate``: its progress, the case's root cause, the closing lines,
the incident report (markdown) and ``--json`` (no I/O).

The state (:class:`~servelab.core.investigate.state.InvestigationState`) holds codes and ids only;
here they become sentences: what was suspected, what cleared or convicted each suspect (the
experiment and its evidence id), what was restored and what it was worth (the recorded A/B of the
change), and what the loop would do next when its budget stopped it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from servelab.core.case.revert import RevertCost
from servelab.core.investigate.events import (
    BudgetSpent,
    ExperimentStarted,
    InvestigateEvent,
    Localized,
    Reproduced,
    Resumed,
    StageStarted,
    SuspectsListed,
    Verdict,
)
from servelab.core.investigate.plan import (
    Action,
    Bisect,
    ComponentTest,
    Finish,
    GoodState,
    KnobTest,
    ListSuspects,
    Localize,
    Reproduce,
    Resolve,
)
from servelab.core.investigate.state import (
    Decided,
    Ending,
    InvestigationState,
    Side,
    SuspectChange,
    Symptom,
)
from servelab.ops.investigate.run import InvestigateOutcome
from servelab.report.docs import describe_cost
from servelab.report.text import show_value

__all__ = [
    "InvestigateDocument",
    "describe_action",
    "describe_event",
    "describe_state",
    "investigate_json",
    "investigate_lines",
    "report_markdown",
    "root_cause",
]

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


def _layer(layer: str | None, worker: str | None = None) -> str:
    text = _LAYERS.get(layer or "", layer or "no layer named")
    return f"{text} ({worker})" if worker else text


def describe_event(event: InvestigateEvent) -> str:
    """One progress line."""
    match event:
        case StageStarted(stage=stage, case_id=cid):
            return f"investigate case {cid}: {stage}"
        case Resumed(case_id=cid, stage=stage, decided=n):
            return f"investigate case {cid}: resumed at {stage} ({n} verdict(s) kept)"
        case Reproduced(reproduced=ok, soak_id=sid, failed=failed, units=units):
            where = f" (soak #{sid})" if sid is not None else ""
            word = "reproduced" if ok else "did not reproduce"
            return f"{word}: {failed} of {units} failed{where}"
        case Localized(layer=layer, worker=worker, side=side, verification_id=vid):
            return (f"localized to {_layer(layer, worker)}, {side} the engines; verify #{vid}"
                    if side is Side.OUTSIDE else
                    f"localized to {_layer(layer, worker)}; verify #{vid}")  # fmt: skip
        case SuspectsListed(since=since, suspects=suspects):
            names = ", ".join(_suspect(s) for s in suspects) or "none"
            return f"changes since {since or 'the first record'}: {names}"
        case ExperimentStarted(how=how, targets=targets):
            return f"{how}: {', '.join(targets)}"
        case Verdict(target=target, outcome=outcome, p_value=p):
            return f"{target}: {outcome}" + (f" (p={p:.3g})" if p is not None else "")
        case BudgetSpent(minutes=minutes, stage=stage):
            return f"--max-minutes reached after {minutes:.1f} min: stopped before {stage}"
        case _:
            assert_never(event)


def _suspect(s: SuspectChange) -> str:
    text = f"{s.service} {s.knob} {show_value(s.good)} → {show_value(s.suspected)}"
    return text + (" (reverted on suspicion)" if s.reverted else "")


def _cost(s: SuspectChange) -> str:
    return describe_cost(RevertCost(s.service, s.knob, s.suspected, s.good, s.ab_id, s.bought))


def describe_action(action: Action, state: InvestigationState) -> str:
    """What the loop would do next."""
    match action:
        case Reproduce():
            return f"reproduce the symptom ({_SYMPTOMS[state.symptom]})"
        case Localize():
            return "localize it (the replay matrix, verify's layers)"
        case ListSuspects():
            return f"list the changes since {state.since or 'the first record'}"
        case ComponentTest(target=target):
            return f"case test {target} (through it against bypassing it)"
        case KnobTest(suspect=s):
            return f"case test {s.target} ({show_value(s.suspected)} against {show_value(s.good)})"
        case GoodState(suspects=suspects):
            return f"soak the good state (the {len(suspects)} changes at their good values)"
        case Bisect(suspects=suspects):
            return f"case bisect over {len(suspects)} changes"
        case Resolve():
            return "resolve the case, revert what is convicted, restore what is cleared"
        case Finish(ending=ending):
            return f"nothing: {ending}"
        case _:
            assert_never(action)


def root_cause(state: InvestigationState) -> str:
    """The case's root cause: the convicted targets and the layer localized."""
    where = _layer(state.layer, state.worker)
    if state.convicted:
        return f"{', '.join(state.convicted)} (by experiment); localized to {where}"
    return f"localized to {where}; no recorded change convicted by experiment"


def _how(d: Decided) -> str:
    ref = f" (evidence #{d.evidence_id})" if d.evidence_id is not None else ""
    p = f", p={d.p_value:.3g}" if d.p_value is not None else ""
    return f"{d.outcome} by {d.by}{p}{ref}"


def describe_state(state: InvestigationState) -> str:
    """One line: how it ended, or where it stands."""
    match state.ending:
        case Ending.NOT_REPRODUCED:
            return f"case {state.case_id}: the symptom did not reproduce; nothing convicted"
        case Ending.RESOLVED:
            return f"case {state.case_id}: {root_cause(state)}"
        case Ending.UNEXPLAINED:
            return f"case {state.case_id}: {root_cause(state)}"
        case None:
            return f"case {state.case_id}: stopped at {state.stage}"
        case _:
            assert_never(state.ending)


def _restored_line(state: InvestigationState) -> str | None:
    if state.restored is None:
        return None
    if not state.restored:
        return "restore plan NOT carried out (or not verified)"
    cleared = [s for s in state.suspects if s.reverted and s.target in state.exonerated]
    names = ", ".join(f"{s.service} {s.knob} → {show_value(s.suspected)}" for s in cleared)
    return f"restored and verified live (verify #{state.restore_verification_id}): {names}"


def investigate_lines(outcome: InvestigateOutcome, next_text: str | None) -> list[str]:
    """The closing lines: each suspect's verdict and how, reverts, restore, what next."""
    state = outcome.state
    lines = [describe_state(state)]
    lines += [f"  {d.target}: {_how(d)}" for d in state.decided]
    for s in state.suspects:
        lines.append(f"  {s.target}: cost of reverting it: {_cost(s)}")
    lines += [f"  reverted (convicted): {t}" for t in state.reverted]
    restored = _restored_line(state)
    if restored:
        lines.append(f"  {restored}")
    if outcome.stopped and next_text:
        lines.append(f"  stopped by --max-minutes; next: {next_text} (--resume --case "
                     f"{state.case_id})")  # fmt: skip
    return lines


def report_markdown(state: InvestigationState, pages: list[str]) -> str:
    """The incident report: symptom, reproduction, localization, suspects and what decided each,
    what was reverted and restored and what it was worth, the regenerated pages."""
    out = [f"# Investigation of case {state.case_id}: {_SYMPTOMS[state.symptom]}", ""]
    out.append(f"- outcome: **{describe_state(state)}**")
    repro = "reproduced" if state.reproduced else "not reproduced"
    out.append(f"- reproduction: {repro}" + (f" (soak #{state.soak_id})" if state.soak_id else ""))
    out.append(
        f"- localized: {_layer(state.layer, state.worker)}"
        + (f" (verify #{state.verification_id})" if state.verification_id else "")
    )
    out.append(f"- last good point: {state.since or 'none recorded'}")
    out += ["", "## Suspects and what decided each", ""]
    out += ["| suspect | change | verdict | how |", "|---|---|---|---|"]
    if state.component:
        target = f"component:{state.component}"
        out.append(f"| {target} | localized | {state.outcome_of(target) or 'open'} | "
                   f"{_decided_how(state, target)} |")  # fmt: skip
    for s in state.suspects:
        out.append(f"| {s.target} | {_suspect(s)} | {state.outcome_of(s.target) or 'open'} | "
                   f"{_decided_how(state, s.target)} |")  # fmt: skip
    out += ["", "## What each change was worth", ""]
    out += [f"- {s.target}: cost of reverting it: {_cost(s)}" for s in state.suspects] or ["- none"]
    out += ["", "## Reverted and restored", ""]
    out += [f"- reverted (convicted): {t}" for t in state.reverted]
    out.append(f"- {_restored_line(state) or 'nothing to restore'}")
    out += ["", "## Pages regenerated from the ledger", ""]
    out += [f"- {p}" for p in pages] or ["- none"]
    return "\n".join(out) + "\n"


def _decided_how(state: InvestigationState, target: str) -> str:
    mine = [d for d in state.decided if d.target == target]
    return _how(mine[-1]) if mine else "not decided"


@dataclass(frozen=True)
class InvestigateDocument:
    """``investigate --json``: the state as stored, where it went, and the words (encoded by the
    one codec at the CLI's edge)."""

    state: InvestigationState
    event_id: int | None
    stopped: bool
    next: str | None
    restore_ok: bool | None
    summary: str
    lines: tuple[str, ...]
    report: str | None = None


def investigate_json(
    outcome: InvestigateOutcome, next_text: str | None, report: str | None
) -> InvestigateDocument:
    """The ``--json`` document of an investigation."""
    restore_ok = outcome.restore.ok if outcome.restore is not None else None
    return InvestigateDocument(
        outcome.state, outcome.event_id, outcome.stopped, next_text, restore_ok,
        describe_state(outcome.state), tuple(investigate_lines(outcome, next_text)), report,
    )  # fmt: skip
