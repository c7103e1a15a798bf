"""The router's view against the spec (pure): every prefill and decode of the spec listed by the
router with the right role and bootstrap port, and no worker listed that the spec does not have (a
stale registration after a host move, say), named with the command that removes it.

sglang-router 0.3.2 lists each worker's ``worker_type`` and, for a prefill, its
``bootstrap_port`` (``io/routerworkers.py``); vllm-router 0.1.17 lists no bootstrap port, so
only the role is compared there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from servelab.core.verify.health import WorkerListing

__all__ = ["ListedWorker", "SpecWorker", "router_view"]


@dataclass(frozen=True)
class SpecWorker:
    """A prefill or decode of the spec."""

    service: str
    url: str
    role: str
    bootstrap_port: int | None


@dataclass(frozen=True)
class ListedWorker:
    """A worker as the router lists it (``id``: the router's, or its URL)."""

    id: str
    url: str
    role: str
    healthy: bool
    bootstrap_port: int | None = None


def _listing(spec: SpecWorker, seen: ListedWorker | None) -> WorkerListing:
    if seen is None:
        return WorkerListing(spec.service, spec.url, spec.role, False, False)
    role = seen.role if seen.role in ("prefill", "decode") and seen.role != spec.role else None
    port = seen.bootstrap_port
    wrong_port = spec.role == "prefill" and port is not None and port != spec.bootstrap_port
    return WorkerListing(
        spec.service, spec.url, spec.role, True, seen.healthy, role,
        port if wrong_port else None, spec.bootstrap_port if wrong_port else None,
    )  # fmt: skip


def router_view(
    spec: Sequence[SpecWorker], listed: Sequence[ListedWorker]
) -> tuple[tuple[WorkerListing, ...], tuple[ListedWorker, ...]]:
    """(a row per spec worker, the listed workers the spec does not have)."""
    by_url = {worker.url: worker for worker in listed}
    rows = tuple(_listing(worker, by_url.get(worker.url)) for worker in spec)
    known = {worker.url for worker in spec}
    return rows, tuple(worker for worker in listed if worker.url not in known)
