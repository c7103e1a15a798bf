"""The pid record a command acts on: this deployment's only (issue 38). Two specs sharing a state
folder share ``run/<service>.json``; the other deployment's record (known by its mark:
:mod:`servelab.io.hosts.ownrecord`) is never stopped nor adopted, and the command says so."""

from __future__ import annotations

from pathlib import Path

from servelab.core.deploy.events import OtherDeploymentsRecord
from servelab.core.deploy.steps import OthersRecord
from servelab.io.hosts.ownrecord import read_own_record, record_place
from servelab.io.hosts.processes import (
    PidRecord,
    remove_pid_record,
    spec_address,
    spec_mark,
    write_pid_record,
)
from servelab.ops.context import Operation

__all__ = ["forget_own", "own_record", "read_own", "write_own"]


async def read_own(op: Operation, service: str) -> tuple[PidRecord | None, OthersRecord | None]:
    """``service``'s pid record when it is this deployment's (None: none, or another's), and
    another deployment's record found there instead."""
    state_dir = op.loaded.state_dir
    mark = spec_mark(op.loaded, service)
    read = await read_own_record(op.host(service), state_dir, service, mark)
    if read.other is None or read.other_pid is None:
        return read.record, None
    return None, OthersRecord(read.other, read.other_pid, str(state_dir))


async def own_record(op: Operation, service: str, *, say: bool = False) -> PidRecord | None:
    """``service``'s pid record when it is this deployment's (None: none, or another's); with
    ``say``, another deployment's record found there is told as one line."""
    record, others = await read_own(op, service)
    if say and others is not None:
        op.say(OtherDeploymentsRecord(service, others.deployment, others.pid, others.state_dir))
    return record


async def write_own(op: Operation, record: PidRecord) -> Path:
    """Write this deployment's pid record of ``record.service``: ``run/<service>.json``, or aside
    (``run/<service>@<address>.json``) while another deployment's live record holds that."""
    service, state_dir = record.service, op.loaded.state_dir
    at = await record_place(op.host(service), state_dir, service, spec_mark(op.loaded, service))
    path = write_pid_record(state_dir, record, at)
    if at is None:  # the first place is ours again: a record kept aside is stale
        remove_pid_record(state_dir, service, spec_address(op.spec, service))
    return path


async def forget_own(op: Operation, service: str) -> None:
    """Remove this deployment's pid record of ``service`` (wherever it is kept), never another's."""
    state_dir = op.loaded.state_dir
    mark = spec_mark(op.loaded, service)
    read = await read_own_record(op.host(service), state_dir, service, mark)
    if read.record is not None:
        remove_pid_record(state_dir, service, read.at)
