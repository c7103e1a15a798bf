"""The pid record a command acts on: this deployment's only (issue 38). Two specs sharing a state
folder share ``run/<service>.json``; the other deployment's record (known by its mark:
:mod:`servelab.io.hosts.ownrecord`) is never stopped nor adopted, and the command says so."""

from __future__ import annotations

from servelab.core.deploy.events import OtherDeploymentsRecord
from servelab.core.deploy.steps import OthersRecord
from servelab.io.hosts.ownrecord import read_own_record
from servelab.io.hosts.processes import PidRecord
from servelab.ops.context import Operation

__all__ = ["own_record", "read_own"]


async def read_own(op: Operation, service: str) -> tuple[PidRecord | None, OthersRecord | None]:
    """``service``'s pid record when it is this deployment's (None: none, or another's), and
    another deployment's record found there instead."""
    state_dir = op.loaded.state_dir
    read = await read_own_record(op.host(service), state_dir, service, op.spec.name)
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
