"""What ``restart --rollback`` puts back: each env file and ``config_file`` exactly as the running
service was started from it.

Every launch keeps a copy of the service's env file and config file as it reads them
(``<backup_dir>/NAME.launched-STAMP``, named in its pid record: :func:`files_at_launch`). Before
a restart with ``--rollback`` stops anything, :func:`prepare_rollback` copies each current file
aside (``NAME.pre-restart-STAMP``) and notes the copy a rollback restores: the one the running
service was launched with (none when the file is still as it was then). So a second ``knob set``
without a restart in between is rolled back to what ran (not to the file between the two), and a
hand edit made after a ``knob set`` and its restart loses only itself (not the ``knob set`` that
ran). A service with no such copy (not running, a process servelab did not launch, a record of an
older servelab, a copy pruned) falls back to the file's latest backup (``NAME.bak-STAMP``: the
file before its last edit).
"""

from __future__ import annotations

from dataclasses import replace

from servelab.core.restart.contract import RestartReport
from servelab.errors import HostError
from servelab.io.hosts.envfiles import (
    config_field,
    env_field,
    latest_backup,
    read_env_bytes,
    save_copy,
)
from servelab.io.hosts.processes import PidRecord, is_alive
from servelab.ops.arguments import CONFIG_AT_LAUNCH, ENV_AT_LAUNCH, config_path
from servelab.ops.context import Operation
from servelab.ops.deploy.ownership import own_record

__all__ = ["files_at_launch", "prepare_rollback"]


async def files_at_launch(op: Operation, service: str) -> dict[str, str]:
    """Copies of ``service``'s env file and config file as its launch reads them (in its backup
    directory, ``NAME.launched-STAMP``), keyed for its pid record."""
    host, backups = op.host(service), op.backup_dir(service)
    out: dict[str, str] = {}
    places = {ENV_AT_LAUNCH: (op.env_path(service), env_field(service)),
              CONFIG_AT_LAUNCH: (config_path(op, service), config_field(service))}  # fmt: skip
    for key, (path, field) in places.items():
        copy = None if path is None else await save_copy(host, path, backups, kind="launched",
                                                         field=field)  # fmt: skip
        if copy is not None:
            out[key] = copy
    return out


async def prepare_rollback(op: Operation, plan: list[str], report: RestartReport) -> None:
    """Before the restart: copy each env file and config file aside (``NAME.pre-restart-STAMP``)
    and note the copy a rollback restores (see the module docstring)."""
    for name in plan:
        host, backups = op.host(name), op.backup_dir(name)
        launched = await _running_copies(op, name)
        path = op.env_path(name)
        if path is not None:
            copy = await save_copy(host, path, backups, kind="pre-restart", field=env_field(name))
            if copy is None:
                raise HostError(f"{host.name}: cannot read {path}: no such file")
            report.backups[name] = copy
            previous = await _source(op, name, path, launched.get(ENV_AT_LAUNCH), env_field(name))
            if previous is not None:
                report.rollback_from[name] = previous
        config = config_path(op, name)
        field = config_field(name)
        copy = None
        if config is not None:
            copy = await save_copy(host, config, backups, kind="pre-restart", field=field)
        if config is not None and copy is not None:
            report.config_backups[name] = copy
            previous = await _source(op, name, config, launched.get(CONFIG_AT_LAUNCH), field)
            if previous is not None:
                report.config_rollback_from[name] = previous


async def _source(
    op: Operation, service: str, path: str, launched: str | None, field: str
) -> str | None:
    """What a rollback restores ``path`` from: ``launched`` (None when the file is still as the
    running service was started from it: nothing to put back), else the latest backup."""
    host = op.host(service)
    if launched is None:
        return await latest_backup(host, path, op.backup_dir(service))
    same = await read_env_bytes(host, launched) == await read_env_bytes(host, path, field=field)
    return None if same else launched


async def _running_copies(op: Operation, service: str) -> dict[str, str]:
    """The copies the running ``service`` was launched with that still exist (empty: it is not
    running, or servelab kept none)."""
    record = await own_record(op, service)
    host = op.host(service)
    if record is None or not await _running(op, record):
        return {}
    copies = {key: record.extra.get(key) for key in (ENV_AT_LAUNCH, CONFIG_AT_LAUNCH)}
    return {k: v for k, v in copies.items() if isinstance(v, str) and await host.exists(v)}


async def _running(op: Operation, record: PidRecord) -> bool:
    """The recorded launch, or the process it handed the service to, still runs."""
    host = op.host(record.service)
    if await is_alive(host, record):
        return True
    served = record.extra.get("served_by")
    if not isinstance(served, dict) or not isinstance(served.get("pid"), int):
        return False
    return await is_alive(host, replace(record, pid=served["pid"],
                                        starttime=served.get("starttime")))  # fmt: skip
