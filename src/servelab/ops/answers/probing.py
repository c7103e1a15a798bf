"""Probes as jobs of a bench run, and their answers read back (no I/O of its own).

A run that checks answers carries :func:`~servelab.core.answers.contract.probes_per_run` probes
(at most the config's share of its requests) placed in its queue by
:func:`~servelab.core.answers.contract.probe_positions`, so they go at the run's own concurrency,
through the same client, between the load's requests. Their jobs are numbered after the load's
(``requests + j``); their records are kept out of the run's metrics (the load's numbers stay
what they were without probes, their slot time aside) and their bodies come back whole
(:attr:`~servelab.ops.bench.part.Part.keep`), read by
:func:`~servelab.core.answers.answer.read_answer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from servelab.core.answers.answer import Answer, read_answer
from servelab.core.answers.contract import (
    AnswersConfig,
    probe_positions,
    probes_for_round,
    probes_per_run,
)
from servelab.core.answers.probes import Probe, probe_body, probe_set
from servelab.core.load.metrics import is_cut
from servelab.core.load.records import RequestRecord
from servelab.ops.bench.jobs import Job

__all__ = ["ProbePlan", "plan_probes", "probe_jobs", "read_probe_answers"]


class ProbePlan:
    """One run's probes: the jobs, where they go, and each job index's probe id."""

    def __init__(self, jobs: list[Job], positions: list[int], probe_of: dict[int, int]) -> None:
        self.jobs = jobs
        self.positions = positions
        self.probe_of = probe_of

    def mix(self, load: list[Job]) -> list[Job]:
        """``load``'s jobs with the probes put in at their positions."""
        out = list(load)
        for at, job in sorted(zip(self.positions, self.jobs, strict=True), key=lambda p: p[0],
                              reverse=True):  # fmt: skip
            out.insert(min(at, len(out)), job)
        return out

    @property
    def keep(self) -> frozenset[int]:
        return frozenset(self.probe_of)


def probe_jobs(
    probes: Sequence[Probe], model: str, first_index: int, *, logprobs: bool = True
) -> list[Job]:
    """``probes`` as jobs numbered from ``first_index`` (bodies serialised once)."""
    return [
        Job(first_index + j, p.prompt_tokens, probe_body(p, model, logprobs=logprobs))
        for j, p in enumerate(probes)
    ]  # fmt: skip


def plan_probes(
    config: AnswersConfig, model: str, requests: int, concurrency: int, round_: int
) -> ProbePlan:
    """The probes of one run of ``requests`` load requests at ``concurrency`` in round
    ``round_``."""
    count = probes_per_run(requests, config.share, config.probes)
    chosen = probes_for_round(probe_set(config.seed, config.probes, config.context_len), count,
                              round_)  # fmt: skip
    jobs = probe_jobs(chosen, model, requests, logprobs=config.logprobs)
    positions = probe_positions(requests, len(jobs), concurrency)
    return ProbePlan(jobs, positions, {j.index: p.id for j, p in zip(jobs, chosen, strict=True)})


def read_probe_answers(
    plan: ProbePlan, records: Sequence[RequestRecord], bodies: dict[int, bytes], level: int
) -> tuple[Answer, ...]:
    """Each sent probe's answer, from its record (a failed request) and its body; one cut by
    the run's end (``--deadline``, a stop: :func:`~servelab.core.load.metrics.is_cut`) is
    marked cut, so it is never judged."""
    out = []
    for record in records:
        probe = plan.probe_of.get(record.index)
        if probe is not None:
            error = None if record.ok else (record.error or "not finished")
            answer = read_answer(probe, bodies.get(record.index, b""), error, level)
            out.append(replace(answer, cut=True) if is_cut(record) else answer)
    return tuple(out)
