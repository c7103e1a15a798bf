"""Reference answers: taken from the baseline state at low concurrency, or reused from the ledger.

:func:`references` looks the state's key up in the ledger
(:class:`~servelab.io.ledger.answers.AnswerStore`) and reuses what it finds; otherwise it sends
the whole probe set to ``url`` at the config's reference concurrency (1 by default: no batch to
vary with), reads the answers and stores them with the state. A probe that fails at the
reference is an error: a reference must be an answer.
"""

from __future__ import annotations

from servelab.core.answers.contract import AnswerReferences, AnswersConfig, State, state_key
from servelab.core.answers.events import ReferencesReused, ReferencesTaken
from servelab.core.answers.probes import probe_set
from servelab.errors import BenchError
from servelab.io.http.stream import StreamClient
from servelab.io.ledger.answers import AnswerStore
from servelab.io.ledger.ledger import Ledger
from servelab.ops.answers.probing import ProbePlan, probe_jobs, read_probe_answers
from servelab.ops.bench.load import slot_starts_ns
from servelab.ops.bench.part import Part, run_part
from servelab.ops.context import Progress, silent

__all__ = ["references", "take_references"]


async def take_references(
    url: str,
    config: AnswersConfig,
    *,
    model: str,
    key: str,
    state: State,
    headers: tuple[tuple[str, str], ...] = (),
    idle_timeout_s: float = 60.0,
) -> AnswerReferences:
    """Every probe of the set sent to ``url`` at the reference concurrency; their answers."""
    probes = probe_set(config.seed, config.probes, config.context_len)
    jobs = probe_jobs(probes, model, 0, logprobs=config.logprobs)
    plan = ProbePlan(jobs, [], {j.index: p.id for j, p in zip(jobs, probes, strict=True)})
    slots = min(config.reference_concurrency, len(jobs))
    part = Part(jobs, "/v1/chat/completions", tuple(slot_starts_ns(slots, 0)), keep=plan.keep)
    async with StreamClient(url, concurrency=slots, idle_timeout_s=idle_timeout_s,
                            headers=dict(headers)) as client:  # fmt: skip
        got = await run_part(client, part, None)
    answers = read_probe_answers(plan, got.records, got.bodies, 0)
    failed = [a for a in answers if a.error is not None]
    if failed or len(answers) < len(probes):
        why = failed[0].error if failed else "not sent"
        raise BenchError(f"reference answers not taken: {len(failed) or len(probes) - len(answers)}"
                         f" of {len(probes)} probes failed ({why})")  # fmt: skip
    return AnswerReferences(key, state, model, slots, tuple(sorted(answers, key=lambda a: a.probe)))


async def references(
    url: str,
    config: AnswersConfig,
    state: State,
    *,
    model: str,
    ledger: Ledger | None,
    say: Progress = silent,
    headers: tuple[tuple[str, str], ...] = (),
    idle_timeout_s: float = 60.0,
) -> AnswerReferences:
    """The state's references: the ledger's when it holds them, else taken now (and stored)."""
    key = state_key(state, config, model)
    store = AnswerStore(ledger) if ledger is not None else None
    found = store.find(key) if store is not None else None
    if found is not None and found.id is not None:
        say(ReferencesReused(key, found.id, len(found.answers)))
        return found
    refs = await take_references(url, config, model=model, key=key, state=state,
                                 headers=headers, idle_timeout_s=idle_timeout_s)  # fmt: skip
    if store is not None:
        refs = store.add(refs)
    say(ReferencesTaken(key, len(refs.answers), refs.concurrency))
    return refs
