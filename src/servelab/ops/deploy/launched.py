"""The pid record of a process a command has just launched (issue 38): written at once, and when
it cannot be (a full or read-only state disk), the process is stopped there and then, so no
process servelab starts is left running where ``down`` could not find it. The error names the
process (pid, host, port), the record and why, and whether it was stopped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from servelab.errors import ServelabError, ServiceStartError
from servelab.io.hosts.processes import PidRecord, stop_record
from servelab.ops.context import Operation
from servelab.ops.deploy.ownership import write_own

__all__ = ["keep_record"]


def _why(exc: OSError) -> str:
    """An OS error in one line, without its errno (``PATH: what``)."""
    if isinstance(exc, ServelabError) or not exc.strerror:
        return str(exc) or type(exc).__name__
    return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror


def _groups(record: PidRecord) -> list[PidRecord]:
    """The record's process group, and the serving process's when it was adopted in another."""
    served = record.extra.get("served_by")
    if not isinstance(served, dict):
        return [record]
    other = replace(record, pid=served["pid"], pgid=served["pgid"], starttime=served["starttime"])
    return [record, other]


async def keep_record(op: Operation, record: PidRecord) -> Path:
    """Write ``record`` (just launched); on failure stop its process group and raise a
    :class:`~servelab.errors.ServiceStartError` naming it (a failed start: the caller's usual
    path, which stops, records and says what is down)."""
    try:
        return await write_own(op, record)
    except OSError as exc:
        svc = op.spec.service(record.service)
        host = op.host(record.service)
        try:
            for group in _groups(record):
                await stop_record(host, group, grace=svc.stop_grace_s)
            after = "stopped it"
        except (ServelabError, OSError) as stop_exc:
            after = f"could not stop it ({stop_exc}): stop it with kill -- -{record.pgid}"
        raise ServiceStartError(
            f"{record.service}: started as pid {_groups(record)[-1].pid} (port {svc.port} on "
            f"{host.name}), "
            f"but its pid record could not be written ({_why(exc)}); {after}"
        ) from exc
