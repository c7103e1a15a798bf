"""What reverting a knob costs, and what evidence would convict it (pure).

The revert cost of going from value ``cur`` back to value ``prev``: an A/B that compared baseline
``prev`` with candidate ``cur`` gives the ratio ``r = cur/prev`` with a CI ``[lo, hi]``; reverting
multiplies throughput by ``1/r``, so the cost is ``1/r − 1`` with CI ``[1/hi − 1, 1/lo − 1]`` and
the verdict flips (a candidate that was "better" makes the revert "worse"). An A/B measured in the
other direction is used as is (``r − 1``).

The conviction test: a knob is convicted by a soak that failed with its value and one that passed
without it, nothing else changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servelab.core.ab.compare import Comparison
from servelab.core.ab.record import AbRunRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.redaction import REDACTED
from servelab.core.secretnames import is_secret_name
from servelab.core.soak.record import SoakRunRecord
from servelab.errors import CaseError

__all__ = [
    "ConcurrencyCost",
    "ConvictionTest",
    "RevertCost",
    "check_recorded",
    "conviction_test",
    "experiment_values",
    "experiment_write",
    "flip_verdict",
    "revert_cost",
    "revert_value",
    "revert_values",
    "setting_change",
]

_FLIP = {"better": "worse", "worse": "better"}


# -- the cost of a revert -----------------------------------------------------------------------


@dataclass(frozen=True)
class ConcurrencyCost:
    """Throughput change of the revert at one concurrency (fractions: −0.113 is −11.3 %)."""

    concurrency: int
    change: float | None
    ci: tuple[float, float] | None
    verdict: str
    confidence: float = 0.95


@dataclass(frozen=True)
class RevertCost:
    """The measured cost of setting ``service``'s ``knob`` from ``from_value`` to ``to_value``."""

    service: str
    knob: str
    from_value: str | None
    to_value: str | None
    ab_id: int | None = None
    points: tuple[ConcurrencyCost, ...] = ()

    @property
    def measured(self) -> bool:
        return self.ab_id is not None and bool(self.points)

    @property
    def worst(self) -> ConcurrencyCost | None:
        """The point where the revert loses most, among those judged "worse"."""
        worse = [p for p in self.points if p.verdict == "worse" and p.change is not None]
        return min(worse, key=lambda p: p.change or 0.0, default=None)


def flip_verdict(verdict: str) -> str:
    """The verdict of the opposite direction ("better" ↔ "worse"; others unchanged)."""
    return _FLIP.get(verdict, verdict)


def _inverted(comparison: Comparison) -> ConcurrencyCost:
    ratio = _positive(comparison.ratio)
    ci = _ci(comparison.ci)
    change = None if ratio is None else 1.0 / ratio - 1.0
    inv_ci = None if ci is None else (1.0 / ci[1] - 1.0, 1.0 / ci[0] - 1.0)
    verdict = flip_verdict(comparison.verdict)
    conc = comparison.concurrency
    return ConcurrencyCost(conc, change, inv_ci, verdict, _confidence(comparison))


def _direct(comparison: Comparison) -> ConcurrencyCost:
    ratio = _positive(comparison.ratio)
    ci = _ci(comparison.ci)
    change = None if ratio is None else ratio - 1.0
    shifted = None if ci is None else (ci[0] - 1.0, ci[1] - 1.0)
    conc = comparison.concurrency
    return ConcurrencyCost(conc, change, shifted, comparison.verdict, _confidence(comparison))


def _confidence(comparison: Comparison) -> float:
    value = comparison.confidence
    return value if 0 < value < 1 else 0.95


def _positive(value: Any) -> float | None:
    """A finite positive number (a ratio or a CI bound), else None (NaN/inf: not computed)."""
    ok = isinstance(value, (int, float)) and math.isfinite(value) and value > 0
    return float(value) if ok else None


def _ci(value: tuple[float, float] | None) -> tuple[float, float] | None:
    if value is None:
        return None
    lo, hi = _positive(value[0]), _positive(value[1])
    return None if lo is None or hi is None else (lo, hi)


def _costs_from(run: AbRunRecord, from_value: str, to_value: str) -> list[ConcurrencyCost]:
    points: list[ConcurrencyCost] = []
    for comp in run.result.comparisons:
        pair = (comp.baseline, comp.candidate)
        if pair == (to_value, from_value):
            points.append(_inverted(comp))
        elif pair == (from_value, to_value):
            points.append(_direct(comp))
    return sorted(points, key=lambda p: p.concurrency)


def revert_cost(
    ab_runs: Sequence[AbRunRecord],
    service: str,
    knob: str,
    from_value: str | None,
    to_value: str | None,
) -> RevertCost:
    """The cost of ``from_value → to_value`` from the newest A/B of this knob comparing both."""
    empty = RevertCost(service, knob, from_value, to_value)
    if from_value is None or to_value is None:
        return empty
    for run in sorted(ab_runs, key=lambda r: r.id, reverse=True):
        if run.service != service or run.knob != knob:
            continue
        points = _costs_from(run, from_value, to_value)
        if points:
            return RevertCost(service, knob, from_value, to_value, run.id, tuple(points))
    return empty


#: The reasons of the writes an experiment makes (its arms, what it keeps, the values it puts
#: back): ``ab``, ``tune``, ``case test``, ``case bisect``, ``investigate``, and every put-back
#: (after a signal or a failure).
_EXPERIMENT = re.compile(
    r"^(?:ab|tune(?: \d+)?|case test)\b|^case \d+: (?:test of|bisect|investigate)\b"
    r"|put back as found"
)


def experiment_write(change: KnobChangeRecord) -> bool:
    """Whether ``change`` is a write an experiment made (its reason says so)."""
    return change.reason is not None and _EXPERIMENT.search(change.reason) is not None


def setting_change(
    recorded: Sequence[KnobChangeRecord], service: str, knob: str, current: str | None
) -> KnobChangeRecord | None:
    """The recorded change that set ``service``'s ``knob`` to ``current``, round trips and
    experiments read as one change (None: no recorded change sets it, e.g. a hand edit).

    From the newest change that wrote ``current``, the history is followed back as long as it is
    unbroken (each change's ``old`` the ``new`` of the one before it; a hand edit breaks it): an
    earlier change that wrote ``current`` is the one that set it (what came between is a round
    trip: a value written and then written back), and an experiment's write
    (:func:`experiment_write`: an ``ab``'s arm, what it kept or put back) is one with the
    experiment writes just before it, so an A/B that kept an arm set it from the value it found.
    """
    mine = sorted(
        (c for c in recorded if c.service == service and c.name == knob), key=lambda c: c.id
    )
    ends = [i for i, c in enumerate(mine) if c.new == current]
    if not ends:
        return None
    first = ends[-1]
    for i in range(ends[-1], 0, -1):
        before, change = mine[i - 1], mine[i]
        if before.new != change.old:
            break
        one_run = first == i and experiment_write(before) and experiment_write(change)
        if before.new == current or one_run:
            first = i - 1
    return mine[first]


def revert_values(
    changes: Sequence[KnobChangeRecord], service: str, knob: str, to: str | None = None
) -> tuple[str | None, str | None]:
    """``(current, revert_to)`` of a knob from its recorded changes (``to`` overrides the target).

    The current value is the last change's ``new``; the revert goes to that change's ``old``.
    """
    mine = [c for c in changes if c.service == service and c.name == knob]
    if not mine:
        if to is None:
            raise CaseError(
                f"no recorded change of {service}/{knob} to revert; say the value with --to"
            )
        return None, to
    last = max(mine, key=lambda c: c.id)
    if to is None:
        check_recorded(service, knob, last.old)
    return last.new, (to if to is not None else last.old)


def revert_value(
    recorded: Sequence[KnobChangeRecord],
    service: str,
    knob: str,
    current: str | None,
    to: str | None = None,
) -> str | None:
    """The value ``case revert`` goes to from ``current``: ``to``, else the value before the
    change that set ``current`` (:func:`setting_change`). Changes recorded, but none that set
    ``current`` (a hand edit), and no ``to``: CaseError naming the last recorded change."""
    setter = setting_change(recorded, service, knob, current)
    mine = [c for c in recorded if c.service == service and c.name == knob]
    if setter is None and mine and to is None:
        last = max(mine, key=lambda c: c.id)
        now = "unset" if current is None else current
        then = "unset" if last.new is None else last.new
        raise CaseError(
            f"no recorded change set {service}/{knob} to its current value {now} (edited by "
            f"hand?); the last recorded change (#{last.id}) set it to {then}; say the value to "
            "revert to with --to"
        )
    return revert_values([] if setter is None else [setter], service, knob, to)[1]


def check_recorded(service: str, knob: str, value: str | None) -> None:
    """Refuse to write back a recorded value that the ledger holds masked (a secret-looking
    knob's, or a secret-shaped value: :func:`servelab.core.redaction.mask`): it would write
    ``***`` into the file."""
    if value is not None and REDACTED in value:
        looks = "looks secret" if is_secret_name(knob) else "had a secret-shaped value"
        raise CaseError(
            f"{service}/{knob} {looks}: the ledger keeps its values masked, not what to "
            "write back; set it with `servelab knob set` (its file's backups hold the old value)"
        )


# -- conviction ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvictionTest:
    """What would convict a knob: a soak failing with ``with_value`` and passing with ``without``.

    ``failing_with``/``passing_without`` are the recorded soaks (ids) that already show it.
    """

    target: str
    with_value: str | None
    without_value: str | None
    failing_with: tuple[int, ...] = ()
    passing_without: tuple[int, ...] = ()

    @property
    def met(self) -> bool:
        return bool(self.failing_with) and bool(self.passing_without)


def conviction_test(
    soaks: Sequence[SoakRunRecord],
    service: str,
    knob: str,
    with_value: str | None,
    without_value: str | None,
) -> ConvictionTest:
    """Which recorded soaks (their config's ``knobs``) already meet the conviction test."""
    failing: list[int] = []
    passing: list[int] = []
    for soak in soaks:
        value = soak.result.config.knob(service, knob)
        if value is not None and value == with_value and soak.ok is False:
            failing.append(soak.id)
        if value is not None and value == without_value and soak.ok is True:
            passing.append(soak.id)
    target = f"knob:{service}/{knob}"
    return ConvictionTest(target, with_value, without_value, tuple(failing), tuple(passing))


def experiment_values(
    case_changes: Sequence[KnobChangeRecord],
    recorded: Sequence[KnobChangeRecord],
    service: str,
    knob: str,
    *,
    current: str | None,
    to: str | None = None,
) -> tuple[str | None, str | None]:
    """``(suspect, revert)``: the two values a verdict experiment compares for a knob.

    When the case already reverted the knob (``case_changes``, its restores left out), the suspect
    is the value before the case's first revert and the revert the case's last value; else the
    suspect is the ``current`` value and the revert the value before the change that set it
    (:func:`setting_change`, as ``case revert`` would go). ``to`` names the revert value instead.
    """
    mine = [c for c in case_changes if c.service == service and c.name == knob]
    if mine:
        first, last = min(mine, key=lambda c: c.id), max(mine, key=lambda c: c.id)
        suspect, revert = first.old, last.new
    else:
        found = setting_change(recorded, service, knob, current)
        setting = [] if found is None else [found]
        suspect, revert = current, revert_values(setting, service, knob, to)[1]
    revert = to if to is not None else revert
    if suspect == revert:
        shown = "unset" if suspect is None else suspect
        raise CaseError(f"both arms of {service}/{knob} would be {shown}; say the other with --to")
    return suspect, revert
