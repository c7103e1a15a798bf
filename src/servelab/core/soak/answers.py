"""A soak's answer probes judged (pure): the few greedy probes of verify's e2e layer sent at
concurrency 1 before the sessions and again while they run, each checked without a reference
(a structural failure, a pass key not recalled), against the deployment's references when the
ledger holds them (verify's), else the one under load against its own answer at C1 (an answer
the load changed).

Each wrong answer is a :class:`~servelab.core.soak.evidence.CorrectnessIssue` of kind
:data:`ANSWER_WRONG` (session :data:`PROBE_SESSION`, round 0 at C1 and 1 under load); when the
changed answers of a phase carry the hand-off's signature
(:func:`~servelab.core.answers.transfer.site_of`: the prefill's first token agrees, the decode's
differ from the first on, in every changed probe), one more of kind :data:`ANSWER_KV_TRANSFER`,
which the soak's rules turn into a finding at the decode's transfer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from servelab.core.answers.answer import Answer
from servelab.core.answers.probes import Probe
from servelab.core.answers.transfer import AnswerSite
from servelab.core.soak.evidence import CorrectnessIssue
from servelab.core.verify.answers import ProbeOutcome, outcome_of, site_of_outcomes

__all__ = ["ANSWER_KV_TRANSFER", "ANSWER_WRONG", "PROBE_SESSION", "answer_issues"]

ANSWER_WRONG = "answer_wrong"
ANSWER_KV_TRANSFER = "answer_kv_transfer"
#: The session number the probes' issues carry (the determinism probe's is -1).
PROBE_SESSION = -2


def _detail(o: ProbeOutcome) -> str:
    why = [str(f) for f in o.failures] + (["key-not-recalled"] if o.recalled is False else [])
    if o.at is not None:
        why.append(f"differs-from-token-{o.at}")
    return f"probe {o.probe} {o.kind}: {' '.join(why) or 'changed'}: {o.text[:80]!r}"


def _phase(
    probes: Sequence[Probe], answers: Sequence[Answer], refs: Mapping[int, Answer], rnd: int
) -> list[CorrectnessIssue]:
    by_id = {a.probe: a for a in answers}
    # a probe whose request failed is the soak's failure to judge (a stall, an error), not a
    # wrong answer: only answers that arrived are judged here
    answered = [p for p in probes if p.id in by_id and by_id[p.id].error is None]
    outcomes = [outcome_of(p, by_id[p.id], refs.get(p.id)) for p in answered]
    issues = [CorrectnessIssue(ANSWER_WRONG, PROBE_SESSION, rnd, _detail(o))
              for o in outcomes if o.wrong]  # fmt: skip
    if site_of_outcomes(outcomes) is AnswerSite.KV_TRANSFER:
        what = f"{sum(o.wrong for o in outcomes)} of {len(outcomes)} first differ at token 1"
        issues.append(CorrectnessIssue(ANSWER_KV_TRANSFER, PROBE_SESSION, rnd, what))
    return issues


def answer_issues(
    probes: Sequence[Probe],
    at_c1: Sequence[Answer],
    loaded: Sequence[Answer],
    refs: Mapping[int, Answer] | None,
) -> list[CorrectnessIssue]:
    """Every wrong answer of both phases, and the hand-off's signature where a phase shows it
    (``refs``: the deployment's references by probe; None: none stored)."""
    own = {a.probe: a for a in at_c1 if a.error is None}
    return [*_phase(probes, at_c1, refs or {}, 0), *_phase(probes, loaded, refs or own, 1)]
