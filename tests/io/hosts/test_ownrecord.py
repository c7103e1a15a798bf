"""Whose a pid record is (shared state folders, issue 38): by the mark it keeps, else by the mark
its live process carries; a dead older record without one stays this deployment's, as before."""

from __future__ import annotations

from pathlib import Path

from servelab.io.hosts.host import Host
from servelab.io.hosts.ownrecord import OwnRecord, read_own_record
from servelab.io.hosts.processes import PidRecord, read_pid_record, write_pid_record


def _record(pid: int, extra: dict[str, object]) -> PidRecord:
    return PidRecord("a", "local", pid, pid, None, "/l", "2026-12-06T00:00:00+00:00",
                     command="true", extra=extra)  # fmt: skip


async def test_a_kept_mark_names_the_deployment(host: Host, tmp_path: Path) -> None:
    write_pid_record(tmp_path, _record(2**22 + 7, {"mark": "prod/a"}))  # no such process
    mine = await read_own_record(host, tmp_path, "a", "prod")
    assert mine == OwnRecord(read_pid_record(tmp_path, "a"))
    assert await read_own_record(host, tmp_path, "a", "staging") == OwnRecord(
        None, "prod", 2**22 + 7
    )


async def test_an_older_dead_record_stays_this_deployments(host: Host, tmp_path: Path) -> None:
    write_pid_record(tmp_path, _record(2**22 + 7, {}))
    assert (await read_own_record(host, tmp_path, "a", "staging")).record is not None
    assert await read_own_record(host, tmp_path, "b", "staging") == OwnRecord(None)
