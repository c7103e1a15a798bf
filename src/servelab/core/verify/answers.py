"""The e2e layer's answer probes: what each answered against its reference, and the verdict (pure).

A few greedy probes of the answers' probe set (:mod:`servelab.core.answers.probes`: a plain one, a
tool call with a JSON schema, a pass key in a long context) go through the entry point one at a
time after the e2e probe passed. Each is checked without a reference (a structural failure, a pass
key not recalled: :func:`~servelab.core.answers.answer.check_answer`) and, when the ledger holds
references for the deployment, against them; a changed answer's first differing position says
where it went wrong (:mod:`servelab.core.answers.transfer`).

Codes (:class:`~servelab.core.verify.checks.CheckCode`): ``e2e.answers_same`` (every answer as
its reference), ``e2e.answers_references_taken`` (none stored yet: these answers passed the checks
that need no reference and became the references), ``e2e.answers_unreferenced`` (no ledger: only
those checks), ``e2e.answers_changed`` (fails: an answer wrong or changed; ``site`` says where).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from servelab.core.answers.answer import TEXT_MAX, Answer, Failure, check_answer
from servelab.core.answers.probes import Probe, ProbeKind
from servelab.core.answers.transfer import AnswerSite, Divergence, diverge_at, site_of
from servelab.core.redacted import StoredText

__all__ = ["AnswerProbes", "ProbeOutcome", "outcome_of", "site_of_outcomes"]


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe's answer: wrong (a structural failure, a key not recalled, or changed from its
    reference), the failures, recall, where it first differs (top-1 position; None: the same, or
    unknown) and whether its first token agrees, and the two texts when it is wrong (cut)."""

    probe: int
    kind: ProbeKind
    wrong: bool
    failures: tuple[Failure, ...] = ()
    recalled: bool | None = None
    at: int | None = None
    first_token_agrees: bool | None = None
    text: str = ""
    reference: str = ""


@dataclass(frozen=True)
class AnswerProbes:
    """``e2e.answers_*``: the probes sent through ``entry`` (one at a time), their outcomes, the
    references compared with (their ledger row and the spec hash of the state they came from;
    None: none), where the changed ones went wrong, and the probes' wall time; ``model``
    encoded with a token in it masked."""

    model: StoredText
    outcomes: tuple[ProbeOutcome, ...]
    total_s: float
    references_id: int | None = None
    references_state: str | None = None
    site: AnswerSite | None = None

    @property
    def wrong(self) -> int:
        return sum(o.wrong for o in self.outcomes)


def outcome_of(probe: Probe, answer: Answer, reference: Answer | None) -> ProbeOutcome:
    """``answer`` to ``probe`` checked, against ``reference`` when there is one. verify sets no
    deadline: a probe cut (by a stop) never answered, a failed request here, never a pass."""
    check = check_answer(probe, replace(answer, cut=False), reference)
    wrong = (
        check.wrong if reference is not None else bool(check.failures) or check.recalled is False
    )
    where = diverge_at(answer, reference) if reference is not None and check.differs else None
    return ProbeOutcome(
        probe.id, probe.kind, wrong, check.failures, check.recalled,
        None if where is None else where.at, None if where is None else where.first_token_agrees,
        answer.text[:TEXT_MAX] if wrong else "",
        reference.text[:TEXT_MAX] if wrong and reference is not None else "",
    )  # fmt: skip


def site_of_outcomes(outcomes: Sequence[ProbeOutcome]) -> AnswerSite | None:
    """Where the wrong answers that have a reference went wrong (None: none to place)."""
    placed = [o for o in outcomes if o.wrong and (o.at is not None or o.reference)]
    if not placed:
        return None
    return site_of([Divergence(o.probe, o.at, o.first_token_agrees) for o in placed])
