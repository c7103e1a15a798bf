"""The health layer's sentences: a readiness endpoint's answer and, for a router, its own
worker list against the spec's (:mod:`servelab.core.verify.health`; no I/O, returns str)."""

from __future__ import annotations

import shlex

from servelab.core.verify.checks import CheckCode
from servelab.core.verify.health import HealthProbe, WorkerListing
from servelab.report.text import url_text

__all__ = ["WORKER_NOTE", "describe_health"]

#: What a PD worker's passing health check does not prove.
WORKER_NOTE = "a PD worker's own health check never exercises the KV transfer (see e2e)"

_C = CheckCode


def describe_health(code: CheckCode, data: HealthProbe) -> str:
    """A ``health.*`` check's reason: the endpoint's answer, and what the router's worker list
    says against the spec."""
    if code is _C.HEALTH_UNREACHABLE:
        return f"{data.path}: unreachable: {data.error}"
    if code is _C.HEALTH_HTTP_ERROR:
        return f"{data.path}: HTTP {data.status}: {data.body or ''}"
    ready = _ready(data)
    if code is _C.HEALTH_WORKER_READY:
        return f"{ready}; {WORKER_NOTE}"
    if code is _C.HEALTH_WORKERS_MISSING:
        return (
            f"{ready}; but the router does not list {', '.join(data.missing or ())} "
            "(out of the router: `servelab restart --rolling NAME` puts a worker back)"
        )
    if code is _C.HEALTH_WORKERS_MISREGISTERED:
        wrong = [_misregistered(row) for row in data.workers or () if row.misregistered]
        return f"{ready}; but the router registered {'; '.join(wrong)}"
    if code is _C.HEALTH_WORKERS_UNREADABLE:
        return f"{ready}; but the router's worker list cannot be read: {data.workers_error}"
    if code is _C.HEALTH_BOOTSTRAP_MISMATCH:
        return (
            f"{ready}; but it listens for the KV bootstrap on port {data.listening_bootstrap_port},"
            f" while the spec says {data.spec_bootstrap_port} (the port the router tells each "
            "decode): every hand-off would wait on the wrong port — make the spec's "
            "bootstrap_port and the engine's --disaggregation-bootstrap-port the same"
        )
    if code is _C.HEALTH_WORKERS_UNKNOWN:
        stale = [f"{url_text(w.url)} ({w.role or 'no role'}; remove it: "
                 f"`{shlex.join(url_text(word) for word in w.remove)}`)"
                 for w in data.unknown or ()]  # fmt: skip
        return f"{ready}; but the router lists a worker the spec does not have: {', '.join(stale)}"
    return ready


def _misregistered(row: WorkerListing) -> str:
    parts = []
    if row.router_role is not None:
        parts.append(f"as {row.router_role} (the spec: {row.role})")
    if row.router_bootstrap_port is not None:
        parts.append(
            f"with bootstrap port {row.router_bootstrap_port} (the spec: {row.spec_bootstrap_port})"
        )
    return f"{row.service} " + " and ".join(parts)


def _ready(data: HealthProbe) -> str:
    text = f"{data.path} {data.status} in {data.elapsed_s * 1000:.0f} ms"
    if data.healthy_workers is not None:
        text += f" ({data.healthy_workers}/{data.total_workers} workers healthy)"
    listed = [_listed(row) for row in data.workers or () if row.listed]
    if listed:  # the ones it does not list are named once, by the check that says so
        text += "; router lists " + ", ".join(listed)
    return text


def _listed(row: WorkerListing) -> str:
    return f"{row.service} {'healthy' if row.healthy else 'unhealthy'}"
