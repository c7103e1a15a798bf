"""Probes sent one at a time to one URL, their answers read back (verify's e2e layer, soak).

One slot: the probes go at concurrency 1 of their own (what else the deployment runs at the time
is the caller's business: nothing for verify, the soak's sessions for its probes under load).
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.answers.answer import Answer
from servelab.core.answers.probes import Probe
from servelab.io.http.stream import StreamClient
from servelab.ops.answers.probing import ProbePlan, probe_jobs, read_probe_answers
from servelab.ops.bench.part import Part, run_part

__all__ = ["ask_probes"]


async def ask_probes(
    base: str,
    model: str,
    probes: Sequence[Probe],
    *,
    timeout_s: float,
    headers: Sequence[tuple[str, str]] = (),
    level: int = 1,
    fresh: bool = False,
) -> list[Answer]:
    """Each of ``probes`` sent to ``base`` in turn (streamed, greedy, with log-probabilities);
    their answers by probe id (``level``: the concurrency they are said to be answered at;
    ``fresh``: each on a new connection, as verify's single e2e request is, so a keep-alive
    fault stays the soak's to find and the probes judge answers alone)."""
    jobs = probe_jobs(probes, model, 0, logprobs=True)
    plan = ProbePlan(jobs, [], {j.index: p.id for j, p in zip(jobs, probes, strict=True)})
    part = Part(jobs, "/v1/chat/completions", (0,), keep=plan.keep)
    async with StreamClient(base, concurrency=1, idle_timeout_s=timeout_s,
                            headers=dict(headers), force_close=fresh) as client:  # fmt: skip
        got = await run_part(client, part, None)
    return sorted(read_probe_answers(plan, got.records, got.bodies, level), key=lambda a: a.probe)
