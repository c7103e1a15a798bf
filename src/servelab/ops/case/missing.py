"""A knob command's env file that is gone (issue 38): ``restore`` and ``case revert``, forced or
not, refuse when a service's env file does not exist, naming it and its latest backup, before
anything is written or restarted. Writing the knob would otherwise create a file holding that
one variable, and the restart would start the engine without the rest of its environment."""

from __future__ import annotations

from collections.abc import Iterable

from servelab.errors import CaseError
from servelab.io.hosts.envfiles import latest_backup
from servelab.ops.context import Operation

__all__ = ["refuse_missing_env_files"]


async def refuse_missing_env_files(op: Operation, services: Iterable[str], *, command: str) -> None:
    """Raise :class:`CaseError` (exit 2) for the first of ``services`` whose env file is gone."""
    for service in dict.fromkeys(services):
        path = op.env_path(service)
        host = op.host(service)
        if path is None or await host.exists(path):
            continue
        backup = await latest_backup(host, path, op.backup_dir(service))
        back = f"copy its latest backup {backup} there" if backup else "recreate it"
        raise CaseError(
            f"{host.name}:{path}: {service}'s env file does not exist (deleted?); {command} "
            f"would create it holding only the knob it sets, and start {service} without the "
            f"rest of its environment: {back}, then run {command} again"
        )
