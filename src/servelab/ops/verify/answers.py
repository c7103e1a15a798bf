"""The e2e layer's answer probes, sent: a few greedy probes through the entry point, one at a time,
checked without a reference and against the deployment's references in the ledger.

The references (:class:`~servelab.io.ledger.answers.AnswerStore`) are keyed by the deployment
(:func:`answers_owner`: its router's mark, so two specs of one name sharing a ledger keep their
own), the served model and the probe set, not by the spec's hash: a change of a knob or of a
fault must still be compared with the answers from before it (the state they came from is kept
with them and shown). The first verify that finds none stores its answers as the references when
they pass every check that needs none (no structural failure, every pass key recalled), so a
deployment that is already wrong never becomes its own reference; ``rebase`` stores them anew.
The rule and the wording: :mod:`servelab.core.verify.answers`, :mod:`servelab.report.verify`.
"""

from __future__ import annotations

from time import perf_counter

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswerReferences, AnswersConfig, State, state_key
from servelab.core.answers.probes import Probe, probe_set
from servelab.core.deploy.mark import Mark
from servelab.core.deploy.spec import spec_hash
from servelab.core.verify.answers import AnswerProbes, outcome_of, site_of_outcomes
from servelab.core.verify.checks import Check, CheckCode
from servelab.io.hosts.processes import spec_mark
from servelab.io.ledger.answers import AnswerStore
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.answers.asking import ask_probes
from servelab.ops.context import Operation

__all__ = ["answers_check", "answers_owner", "deployment_references", "verify_probes"]

_C = CheckCode
#: The probe set verify draws from (its first probes: one of each kind, in turn), sized against a
#: 2,048-token context: the retrieval probe's context is 409 words, about the e2e probe's 512 (a
#: real KV transfer, a body of a few KB that any proxy in front passes as it passes the e2e probe).
_CONFIG = AnswersConfig(probes=24, context_len=2048)


def verify_probes(count: int) -> tuple[Probe, ...]:
    """The first ``count`` probes of the set (plain, tool, retrieval, plain, ...)."""
    return probe_set(_CONFIG.seed, _CONFIG.probes, _CONFIG.context_len)[:count]


def _key(owner: str, model: str) -> str:
    return "verify-" + state_key(State(f"verify:{owner}", ()), _CONFIG, model)


def answers_owner(loaded: LoadedSpec) -> str:
    """Whose references these are (issue 38): the mark of the deployment's router (else of its
    entry point), ``name/service@host:port#place``, as knob changes tell deployments apart
    (:func:`~servelab.io.hosts.processes.spec_mark`): two specs of one name sharing a ledger are
    two deployments, each with its own references."""
    spec = loaded.spec
    return spec_mark(loaded, spec.router_name or spec.entry_point)


def deployment_references(ledger: Ledger, owner: str, model: str) -> AnswerReferences | None:
    """The references verify keeps for deployment ``owner`` (:func:`answers_owner`; a bare name:
    a soak recorded before owners were) serving ``model`` (None: none yet). None under the owner:
    those stored by the name alone, before owners were (anyone's of that name, as a knob change
    recorded before marks is)."""
    store = AnswerStore(ledger)
    found = store.find(_key(owner, model))
    mark = Mark.parse(owner)
    return found if found is not None or mark is None else store.find(_key(mark.name, model))


async def answers_check(
    op: Operation, entry: str, base: str, model: str, *, count: int, timeout_s: float,
    rebase: bool = False,
) -> Check:  # fmt: skip
    """``count`` probes through ``base`` (the entry point ``entry``), checked (module docstring)."""
    probes = verify_probes(count)
    started = perf_counter()
    answers = await ask_probes(base, model, probes, timeout_s=timeout_s, fresh=True)
    took = round(perf_counter() - started, 3)
    store = AnswerStore(op.ledger) if op.ledger is not None else None
    owner = answers_owner(op.loaded)
    refs = None if op.ledger is None or rebase else deployment_references(op.ledger, owner, model)
    by_probe = refs.by_probe() if refs is not None else {}
    by_id = {a.probe: a for a in answers}
    outcomes = tuple(outcome_of(p, by_id.get(p.id, Answer(p.id, "", error="not sent")),
                                by_probe.get(p.id)) for p in probes)  # fmt: skip
    data = AnswerProbes(model, outcomes, took, None if refs is None else refs.id,
                        None if refs is None else refs.state.spec_hash,
                        site_of_outcomes(outcomes))  # fmt: skip
    if data.wrong:
        return Check(entry, False, _C.E2E_ANSWERS_CHANGED, data)
    if refs is not None:
        return Check(entry, True, _C.E2E_ANSWERS_SAME, data)
    if store is None:
        return Check(entry, True, _C.E2E_ANSWERS_UNREFERENCED, data)
    state = State(spec_hash(op.spec), ())
    taken = store.add(AnswerReferences(_key(owner, model), state, model, 1, tuple(answers)))
    data = AnswerProbes(model, outcomes, took, taken.id, state.spec_hash)
    return Check(entry, True, _C.E2E_ANSWERS_REFERENCES_TAKEN, data)
