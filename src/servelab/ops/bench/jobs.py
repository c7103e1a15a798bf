"""The requests of one run (or warm-up): :class:`Job`, one request to send (its place, its
prompt's length, its body serialised once), and :func:`jobs_for`, a run's seeded synthetic jobs.
The loops that send them are :mod:`servelab.ops.bench.load`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from servelab.core.load.workload import LengthDist, generate_requests, iter_requests
from servelab.io.http.client import chat_body, completion_body

__all__ = ["BUILD_WORDS", "Job", "build_jobs", "jobs_for"]

#: How many prompt words :func:`build_jobs` builds between two looks at its stop event (512
#: requests of 128 words, ~20 ms; a prompt is never cut, so one very long prompt is one look).
BUILD_WORDS = 65_536


@dataclass(frozen=True, slots=True)
class Job:
    """One request to send: its place in the run, its prompt's length, its body, (a turn of a
    replayed conversation) the conversation's ordinal, and the ``max_tokens`` its body asks
    (None: not known; usage above it is not believed)."""

    index: int
    input_len: int
    body: bytes
    session: int | None = None
    max_tokens: int | None = None


def jobs_for(
    n: int,
    seed: int,
    *,
    input_len: LengthDist,
    output_len: LengthDist,
    shared_prefix_len: int,
    model: str,
    endpoint: str,
    ignore_eos: bool,
) -> list[Job]:
    """The ``n`` requests of one run (or warm-up), bodies serialised once."""
    specs = generate_requests(
        n,
        input_len=input_len,
        output_len=output_len,
        seed=seed,
        shared_prefix_len=shared_prefix_len,
    )
    make = chat_body if "chat" in endpoint else completion_body
    return [
        Job(
            s.index,
            s.input_len,
            make(model, s.prompt, s.output_len, ignore_eos=ignore_eos),
            max_tokens=s.output_len,
        )
        for s in specs
    ]


async def build_jobs(
    n: int,
    seed: int,
    stop: asyncio.Event | None,
    *,
    input_len: LengthDist,
    output_len: LengthDist,
    shared_prefix_len: int,
    model: str,
    endpoint: str,
    ignore_eos: bool,
) -> list[Job]:
    """:func:`jobs_for`'s jobs, built on a running loop: it yields every :data:`BUILD_WORDS`
    prompt words, so a stop signal is acted on while a large run is prepared; once ``stop`` is
    set it returns the jobs built so far (the run then stops before sending any)."""
    make = chat_body if "chat" in endpoint else completion_body
    specs = iter_requests(n, input_len=input_len, output_len=output_len, seed=seed,
                          shared_prefix_len=shared_prefix_len)  # fmt: skip
    jobs: list[Job] = []
    words = 0
    for s in specs:
        if words >= BUILD_WORDS:
            words = 0
            await asyncio.sleep(0)
            if stop is not None and stop.is_set():
                break
        words += s.input_len
        jobs.append(Job(s.index, s.input_len, make(model, s.prompt, s.output_len,
                                                   ignore_eos=ignore_eos),
                        max_tokens=s.output_len))  # fmt: skip
    return jobs
