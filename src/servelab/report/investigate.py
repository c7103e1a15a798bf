"""The words of ``servelab investigate``: its progress, the case's root cause, the closing lines,
the incident report (markdown) and ``--json`` (no I/O).

The state (:class:`~servelab.core.investigate.state.InvestigationState`) holds codes and ids only;
here they become sentences: what was suspected, what cleared or convicted each suspect (the
experiment and its evidence id), what was restored and what it was worth (the recorded A/B of the
change), and what the loop would do next when its budget stopped it.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from servelab.core.case.revert import RevertCost
from servelab.core.investigate.events import (
    BudgetSpent,
    ExperimentRestarts,
    ExperimentStarted,
    InvestigateEvent,
    Localized,
    Reproduced,
    Resumed,
    SlowMeasured,
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
    SlowTest,
)
from servelab.core.investigate.state import (
    Ending,
    InvestigationState,
    Side,
    SuspectChange,
    Symptom,
)
from servelab.ops.investigate.run import InvestigateOutcome
from servelab.report.docs import describe_cost
from servelab.report.investigation import describe_how as _how
from servelab.report.investigation import describe_layer as _layer
from servelab.report.investigation import describe_slowdown, describe_state
from servelab.report.text import show_value

__all__ = [
    "InvestigateDocument",
    "ab_command",
    "describe_action",
    "describe_event",
    "describe_restarts",
    "investigate_json",
    "investigate_lines",
    "report_markdown",
]

_SYMPTOMS = {Symptom.HANG: "sessions hang", Symptom.SLOW: "slower",
             Symptom.ANSWERS: "answers change"}  # fmt: skip


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
        case SlowMeasured(slowdown=slowdown, skipped=skipped):
            return describe_slowdown(slowdown, skipped)
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


def _cost(s: SuspectChange, state: InvestigationState, spec_args: Sequence[str] = ()) -> str:
    """What the change bought (its newest A/B); a change cleared and restored that no A/B
    measured: "not measured" and the ``servelab ab`` line that measures it."""
    text = describe_cost(RevertCost(s.service, s.knob, s.suspected, s.good, s.ab_id, s.bought))
    cleared = s.reverted and s.target in state.exonerated and state.restored
    if s.ab_id is not None or not cleared or s.good is None or s.suspected is None:
        return text
    return f"{text}; measure it: {ab_command(s, spec_args)}"


def ab_command(s: SuspectChange, spec_args: Sequence[str] = ()) -> str:
    """The ``servelab ab`` line that measures the change (its good value the baseline)."""
    knob = shlex.quote(f"{s.service}:{s.knob}={s.good},{s.suspected}")
    return shlex.join(["servelab", "ab", *spec_args]) + f" --knob {knob}"


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
        case SlowTest(suspect=s):
            return (f"ab of {s.target} ({show_value(s.suspected)} against {show_value(s.good)}) "
                    "on the baseline's workload")  # fmt: skip
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


def describe_restarts(r: ExperimentRestarts) -> str:
    """What an experiment will co-restart, asked before it runs."""
    return (f"{r.how} of {', '.join(r.targets)}: co-restarts {' → '.join(r.services)} "
            "for each arm (proven live each time), the knobs put back as found after")  # fmt: skip


def _restored_line(state: InvestigationState) -> str | None:
    if state.restored is None:
        return None
    if not state.restored:
        return "restore plan NOT carried out (or not verified)"
    cleared = [s for s in state.suspects if s.reverted and s.target in state.exonerated]
    names = ", ".join(f"{s.service} {s.knob} → {show_value(s.suspected)}" for s in cleared)
    return f"restored and verified live (verify #{state.restore_verification_id}): {names}"


def _stopped_line(outcome: InvestigateOutcome, next_text: str) -> str:
    why = ("stopped: the experiment's restarts were declined" if outcome.declined
           else "stopped by --max-minutes")  # fmt: skip
    return f"  {why}; next: {next_text} (--resume --case {outcome.state.case_id})"


def investigate_lines(
    outcome: InvestigateOutcome, next_text: str | None, spec_args: Sequence[str] = ()
) -> list[str]:
    """The closing lines: the slowdown, each suspect's verdict and how, what each change
    bought, reverts, restore, what next."""
    state = outcome.state
    lines = [describe_state(state)]
    if state.slowdown is not None:
        lines.append(f"  {describe_slowdown(state.slowdown)}")
    lines += [f"  {d.target}: {_how(d)}" for d in state.decided]
    for s in state.suspects:
        lines.append(f"  {s.target}: cost of reverting it: {_cost(s, state, spec_args)}")
    lines += [f"  reverted (convicted): {t}" for t in state.reverted]
    restored = _restored_line(state)
    if restored:
        lines.append(f"  {restored}")
    if outcome.stopped and next_text:
        lines.append(_stopped_line(outcome, next_text))
    return lines


def report_markdown(
    state: InvestigationState, pages: list[str], spec_args: Sequence[str] = ()
) -> str:
    """The incident report: symptom, reproduction, localization, suspects and what decided each,
    what was reverted and restored and what it was worth, the regenerated pages."""
    out = [f"# Investigation of case {state.case_id}: {_SYMPTOMS[state.symptom]}", ""]
    out.append(f"- outcome: **{describe_state(state)}**")
    repro = "reproduced" if state.reproduced else "not reproduced"
    repro = "inconclusive" if state.ending is Ending.INCONCLUSIVE else repro
    out.append(f"- reproduction: {repro}" + (f" (soak #{state.soak_id})" if state.soak_id else ""))
    if state.symptom is Symptom.SLOW:
        out.append(f"- {describe_slowdown(state.slowdown, state.small_baselines)}")
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
    out += [f"- {s.target}: cost of reverting it: {_cost(s, state, spec_args)}"
            for s in state.suspects] or ["- none"]  # fmt: skip
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
    outcome: InvestigateOutcome, next_text: str | None, report: str | None,
    spec_args: Sequence[str] = (),
) -> InvestigateDocument:  # fmt: skip
    """The ``--json`` document of an investigation."""
    restore_ok = outcome.restore.ok if outcome.restore is not None else None
    lines = tuple(investigate_lines(outcome, next_text, spec_args))
    return InvestigateDocument(
        outcome.state, outcome.event_id, outcome.stopped, next_text, restore_ok,
        describe_state(outcome.state), lines, report,
    )  # fmt: skip
