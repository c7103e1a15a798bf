"""Why failures gave no finding (pure; wording lives in ``report.soak``).

When a soak failed and :mod:`servelab.core.soak.diagnose` found nothing, :func:`undecided` says
why (:class:`UndecidedReason`), lists the observations that conflict (the failures against the
replay cells that worked) and the sources that stayed unknown, and names the probe that would
tell the suspects apart (:class:`NextProbe`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from servelab.core.soak.evidence import SoakEvidence
from servelab.core.soak.finding import Finding
from servelab.core.soak.observation import (
    FreshConnectionStalls,
    MatrixCell,
    ReusedConnectionStalls,
    SignatureFailures,
    Stalls,
    is_unknown,
)
from servelab.core.soak.observe import observations
from servelab.core.soak.replay import Payload, Reason
from servelab.core.telemetry.rules import ServerView, assess, telemetry_observations
from servelab.core.verify.coldstart import Start

__all__ = ["NextProbe", "Undecided", "UndecidedReason", "undecided"]

#: The facts that are the failures themselves (what a "no finding" weighs the replays against).
_FAILED = (SignatureFailures, Stalls, ReusedConnectionStalls, FreshConnectionStalls)


class UndecidedReason(StrEnum):
    """Why failures gave no finding."""

    NOT_REPRODUCED = "not_reproduced"  # every replay answered the failing payload
    COLD = "cold_start"  # ... and the engines were cold when the soak began
    NOT_LOCALIZED = "not_localized"  # no matrix was run (--no-localize, budget, deadline)
    NO_PAIR = "no_pair_replay"  # the router fails, no pair could be replayed directly
    CONFLICT = "conflict"  # evidence points different ways, no rule's gate holds


class NextProbe(StrEnum):
    """The probe that would tell the suspects apart when there is no finding."""

    REPLAY_UNDER_LOAD = "replay_under_load"  # soak longer / with more sessions, then replay
    SOAK_WARM = "soak_again_warm"  # soak again now that the engines are warm
    LOCALIZE = "localize"  # soak again with localization on and time for it
    PAIR_REPLAY = "pair_replay"  # give the prefills' bootstrap ports so pairs can be replayed
    SCRAPE = "scrape_unknown"  # make the unknown sources answer (metrics port, /metrics)
    SOAK_AGAIN = "soak_again"  # replayed alone and at its load, it passed: does it recur?


@dataclass(frozen=True, slots=True)
class Undecided:
    """Why failures gave no finding: a reason code, the observations that conflict, the sources
    that stayed unknown, and the probe that would tell them apart."""

    reason: UndecidedReason
    conflicting: tuple[str, ...]
    unknown: tuple[str, ...]
    probe: NextProbe


def undecided(
    ev: SoakEvidence, findings: Sequence[Finding], server: ServerView | None = None
) -> Undecided | None:
    """Why failures gave no finding (None: there is a finding, or nothing failed); the unknown
    sources include the run telemetry's (``server``)."""
    if findings or not (ev.failures or ev.stalls):
        return None
    obs = {o.id: o for o in observations(ev)}
    failed = [o.id for o in obs.values() if isinstance(o, _FAILED)]
    unknown = tuple(o.id for o in obs.values() if is_unknown(o))
    unknown += tuple(o.id for o in telemetry_observations(assess(server)) if is_unknown(o))
    if ev.matrix is None:
        return Undecided(UndecidedReason.NOT_LOCALIZED, tuple(failed), unknown, NextProbe.LOCALIZE)
    cells = {o.cell.id: o.id for o in obs.values() if isinstance(o, MatrixCell)}
    worked = [cells[c.id] for c in ev.matrix.cells if c.ok]
    reason = ev.matrix.located.reason
    if reason == Reason.NOT_REPRODUCED:
        cold = ev.start is not None and ev.start.start == Start.COLD
        loaded = any(c.payload == Payload.LOADED for c in ev.matrix.cells)
        again = NextProbe.SOAK_AGAIN if loaded else NextProbe.REPLAY_UNDER_LOAD
        code, probe = (
            (UndecidedReason.COLD, NextProbe.SOAK_WARM)
            if cold
            else (UndecidedReason.NOT_REPRODUCED, again)
        )
        return Undecided(code, tuple(failed + worked), unknown, probe)
    if reason == Reason.NO_PAIR_REPLAY:
        failing = [cells.get(i, i) for i in ev.matrix.located.failing]
        return Undecided(
            UndecidedReason.NO_PAIR, tuple(failed + failing), unknown, NextProbe.PAIR_REPLAY
        )
    probe = NextProbe.SCRAPE if unknown else NextProbe.REPLAY_UNDER_LOAD
    return Undecided(
        UndecidedReason.CONFLICT,
        tuple([o.id for o in obs.values() if o.healthy is False] + worked),
        unknown,
        probe,
    )
