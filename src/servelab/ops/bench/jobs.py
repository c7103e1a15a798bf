"""The requests of one run (or warm-up): :class:`Job`, one request to send (its place, its
prompt's length, its body serialised once), and :func:`jobs_for`, a run's seeded synthetic jobs.
The loops that send them are :mod:`servelab.ops.bench.load`."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.load.workload import LengthDist, generate_requests
from servelab.io.http.client import chat_body, completion_body

__all__ = ["Job", "jobs_for"]


@dataclass(frozen=True, slots=True)
class Job:
    """One request to send: its place in the run, its prompt's length, its body, and (a turn
    of a replayed conversation) the conversation's ordinal."""

    index: int
    input_len: int
    body: bytes
    session: int | None = None


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
        Job(s.index, s.input_len, make(model, s.prompt, s.output_len, ignore_eos=ignore_eos))
        for s in specs
    ]
