"""Spawning, checking and stopping service processes for real (locally and over a real sshd)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from servelab.core.deploy.spec import HostSpec
from servelab.core.knobs.envfile import parse_environ
from servelab.io.hosts import processes
from servelab.io.hosts.host import Host, host_for
from servelab.io.hosts.processes import (
    PidRecord,
    command_status,
    group_members,
    is_alive,
    parse_proc_stat,
    read_pid_record,
    remove_pid_record,
    spawn,
    stop_record,
    write_pid_record,
)
from servelab.io.http.client import probe
from tests.support import free_port


async def _wait_ready(url: str, limit: float = 10) -> bool:
    for _ in range(int(limit / 0.1)):
        if (await probe(url, timeout=1)).ok:
            return True
        await asyncio.sleep(0.1)
    return False


def test_parse_proc_stat_with_odd_name() -> None:
    text = (
        "4242 (sglang::r) ou)ter) S 1 4242 4242 0 -1 4194560 "
        + " ".join(["0"] * 12)
        + " 987654 rest\n"
    )
    stat = parse_proc_stat(text)
    assert (stat.pid, stat.state, stat.ppid, stat.pgid, stat.starttime) == (
        4242,
        "S",
        1,
        4242,
        987654,
    )


async def test_spawn_env_alive_stop(host: Host, tmp_path: Path) -> None:
    port = free_port()
    log = str(tmp_path / "logs" / "web.log")
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    record = await spawn(host, service="web", log=log, env={"SERVELAB_KNOB": "a b"}, argv=argv)
    try:
        assert record.pgid == record.pid and record.starttime is not None
        assert await is_alive(host, record)
        assert await _wait_ready(f"http://127.0.0.1:{port}/")
        assert await host.listening_pid(port) == record.pid
        environ = parse_environ(await host.read_environ(record.pid))
        assert environ["SERVELAB_KNOB"] == "a b"
        # a record with the same pid but another start time is not "alive"
        other = PidRecord(**{**record.to_json(), "starttime": (record.starttime or 0) + 1})
        assert not await is_alive(host, other)
    finally:
        outcome = await stop_record(host, record, grace=5)
    assert outcome == "stopped"
    assert not await is_alive(host, record)
    assert await group_members(host, record.pgid) == []
    assert await host.listening_pid(port) is None
    assert await stop_record(host, record, grace=5) == "not running"
    assert "servelab start" in Path(log).read_text()


async def test_stop_kills_stubborn_group(host: Host, tmp_path: Path) -> None:
    # Each child says "ready" only once SIGTERM is ignored: a SIGTERM sent earlier would kill it
    # (and the stop would say "stopped"), so the test waits for both to say so.
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    command = f'{sys.executable} -c "{script}" & {sys.executable} -c "{script}"'
    log = tmp_path / "s.log"
    record = await spawn(
        host,
        service="stubborn",
        log=str(log),
        env={},
        command=command,
        status_file=str(tmp_path / "s.status"),
    )
    deadline = asyncio.get_running_loop().time() + 30
    while not log.exists() or log.read_text().count("ready") < 2:
        assert asyncio.get_running_loop().time() < deadline, "children never said ready"
        await asyncio.sleep(0.05)
    assert len(await group_members(host, record.pgid)) >= 3
    assert await stop_record(host, record, grace=0.5) == "killed"
    assert await group_members(host, record.pgid) == []


async def test_command_status_file(host: Host, tmp_path: Path) -> None:
    record = await spawn(
        host,
        service="cmd",
        log=str(tmp_path / "c.log"),
        env={"X": "7"},
        command='echo "x=$X"; exit 3',
        status_file=str(tmp_path / "c.status"),
    )
    for _ in range(100):
        if await command_status(host, record) is not None:
            break
        await asyncio.sleep(0.05)
    assert await command_status(host, record) == 3
    assert "x=7" in (tmp_path / "c.log").read_text()


def test_pid_records_round_trip(tmp_path: Path) -> None:
    record = PidRecord(
        service="decode",
        host="local",
        pid=1,
        pgid=1,
        starttime=5,
        log="/l",
        started_at="2026-01-01T00:00:00+00:00",
        argv=["a"],
    )
    path = write_pid_record(tmp_path, record)
    assert path == tmp_path / "run" / "decode.json"
    assert read_pid_record(tmp_path, "decode") == record
    remove_pid_record(tmp_path, "decode")
    remove_pid_record(tmp_path, "decode")
    assert read_pid_record(tmp_path, "decode") is None
    (tmp_path / "run" / "bad.json").write_text("{not json")
    assert read_pid_record(tmp_path, "bad") is None


def test_public_api() -> None:
    for name in processes.__all__:
        assert hasattr(processes, name)


async def _printed_args(log: Path) -> str:
    for _ in range(200):  # bounded: 20 s
        text = log.read_text() if log.exists() else ""
        if "ARGS " in text:
            return text.split("ARGS ", 1)[1].splitlines()[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"the service printed nothing: {log.read_text()}")


async def test_a_launched_command_line_is_never_globbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defect 15 (issue 38): an args_env value of ``--chunked-prefill-size=*`` reached the
    engine as a file name: the launch shell expanded the glob. The env file's words are quoted
    one by one; a variable from the host's environment is split with globbing off."""
    for name in ("a.txt", "b.txt", "--chunked-prefill-size=x"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("SL_HOST_ARGS", "--from-host=* ?")
    code = "import sys, time; print('ARGS', sys.argv[1:], flush=True); time.sleep(60)"
    host = host_for("local", HostSpec())
    for args_env, env in (("SL_ARGS", {"SL_ARGS": "--chunked-prefill-size=* --x=[ab].txt  *"}),
                          ("SL_HOST_ARGS", {})):  # fmt: skip
        log = tmp_path / f"{args_env}.log"
        record = await spawn(host, service="eng", log=str(log), env=env, cwd=str(tmp_path),
                             argv=[sys.executable, "-c", code], args_env=args_env)  # fmt: skip
        try:
            printed = await _printed_args(log)
        finally:
            await stop_record(host, record, grace=5)
        expected = env[args_env].split() if env else ["--from-host=*", "?"]
        assert printed == repr(expected)
