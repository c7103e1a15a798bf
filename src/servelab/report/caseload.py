"""The load an answers test reached, in words (no I/O): what it reached, on which witness, against
which reference, and what that means for its verdict (:mod:`servelab.core.case.load`)."""

from __future__ import annotations

from typing import assert_never

from servelab.core.case.experiment import CONVICTED, Decision
from servelab.core.case.load import PROBE_SHARE
from servelab.core.case.reached import LoadCheck, LoadSource, ReachedLoad, ReferenceSource

__all__ = ["LOAD_RULE", "describe_load", "load_clause", "probe_load"]

#: The rule :data:`servelab.core.case.load.RULE_LOAD_NOT_REACHED`, in words.
LOAD_RULE = "the suspect arm never reached the load the wrong answers need: it clears nothing"


def _n(value: float) -> str:
    return f"{value:g}"


def _reached(reached: ReachedLoad | None) -> str:
    if reached is None:
        return "reached an unknown load (no decode gauge answered and no request was sent)"
    match reached.source:
        case LoadSource.ENGINE:
            where = f"running requests on the decode ({reached.series}"
        case LoadSource.CLIENT:
            where = "requests in flight at the client (the decode's gauge did not answer"
        case _:
            assert_never(reached.source)
    return (f"reached {_n(reached.peak)} {where}; median {_n(reached.median)} over "
            f"{reached.samples} samples)")  # fmt: skip


def _reference(check: LoadCheck) -> str:
    ref = check.reference
    match ref.source:
        case ReferenceSource.CASE:
            return f"the wrong answers were seen at {_n(ref.level)} (evidence #{ref.evidence_id})"
        case ReferenceSource.REQUESTED:
            return (f"the case records no load of its wrong answers: the reference is half "
                    f"the requested concurrency, {_n(ref.level)}")  # fmt: skip
        case ReferenceSource.PROBE:
            return (f"the bad state's wrong answers in this probe were seen at {_n(ref.level)} "
                    f"({PROBE_SHARE:.0%} of it needed)")  # fmt: skip
        case _:
            assert_never(ref.source)


def _meaning(check: LoadCheck, decision: Decision) -> str:
    if check.enough:
        return "reached, so the verdict stands"
    if decision.outcome == CONVICTED:
        return "below it, but wrong answers convict at any load"
    return "not shown — rerun with more load or less competing CPU"


def describe_load(check: LoadCheck, decision: Decision) -> str:
    """One line: ``reached 9 running requests on the decode (...); the wrong answers were seen
    at 24 (evidence #3): not shown — rerun with more load or less competing CPU``."""
    return f"{_reached(check.reached)}; {_reference(check)}: {_meaning(check, decision)}"


def _peak(check: LoadCheck) -> str:
    return "unknown" if check.reached is None else _n(check.reached.peak)


def load_clause(check: LoadCheck) -> str:
    """A short clause for a headline: ``load 9 (24 needed)``: what the suspect arm reached and
    the reference it had to reach (not a count of a total: ``load 4 of 2`` read as one)."""
    return f"load {_peak(check)} ({_n(check.reference.level)} needed)"


def probe_load(check: LoadCheck) -> str:
    """A bisection probe's arm against the load to reach: ``its arm reached 6 running requests
    on the decode (...); the bad state's wrong answers in this probe were seen at 24: not shown
    good``, or ``its arm reached the load (40; the bad arm's wrong answers at 24)``."""
    if check.enough:
        return (f"its arm reached the load ({_peak(check)}; the bad arm's wrong answers at "
                f"{_n(check.reference.level)})")  # fmt: skip
    return f"its arm {_reached(check.reached)}; {_reference(check)}: not shown good"
