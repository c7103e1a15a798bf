"""The health layer's data (pure): a readiness endpoint's answer and, for a router, its own
worker list against the spec's workers (:mod:`servelab.core.verify.routerview`). Its codes are
:class:`servelab.core.verify.checks.CheckCode`'s ``health.*`` members; the words are
:mod:`servelab.report.health`'s."""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.ledger.codec import Omitted
from servelab.core.redacted import StoredCommand, StoredUrl

__all__ = ["HealthProbe", "StaleWorker", "WorkerListing"]


@dataclass(frozen=True)
class WorkerListing:
    """One of the spec's workers in the router's own worker list: ``listed``, ``healthy``; when the
    router registered it otherwise than the spec says, the role it lists (``router_role``) or the
    bootstrap port it lists against the spec's (``router_bootstrap_port``,
    ``spec_bootstrap_port``) (:mod:`servelab.core.verify.routerview`)."""

    service: str
    url: StoredUrl
    role: str
    listed: bool
    healthy: bool
    router_role: Omitted[str] = None
    router_bootstrap_port: Omitted[int] = None
    spec_bootstrap_port: Omitted[int] = None

    @property
    def misregistered(self) -> bool:
        return self.router_role is not None or self.router_bootstrap_port is not None


@dataclass(frozen=True)
class StaleWorker:
    """A worker the router lists that the spec does not have, and the command that removes it."""

    url: StoredUrl
    role: str
    id: str
    remove: StoredCommand = ()


@dataclass(frozen=True)
class HealthProbe:
    """``health.*`` but ``health.error``: the readiness endpoint's answer (``status`` None: nothing
    answered, ``error`` says why; a non-2xx answer's ``body``, its first 160 characters). A router's
    also: the worker counts of its readiness document, and its own worker list against the spec's
    workers (``workers``, ``missing``), or why that list could not be read (``workers_error``)."""

    path: str
    status: int | None
    elapsed_s: float
    error: Omitted[str] = None
    body: Omitted[str] = None
    healthy_workers: Omitted[int] = None
    total_workers: Omitted[int] = None
    workers: Omitted[tuple[WorkerListing, ...]] = None
    missing: Omitted[tuple[str, ...]] = None
    workers_error: Omitted[str] = None
    #: Workers the router lists that the spec does not have (stale registrations).
    unknown: Omitted[tuple[StaleWorker, ...]] = None
    #: A prefill's KV bootstrap port as it reports it, against the spec's (the port the router
    #: tells each decode): ``health.bootstrap_mismatch`` when they differ.
    listening_bootstrap_port: Omitted[int] = None
    spec_bootstrap_port: Omitted[int] = None
