"""Hosts, locally and over a real loopback sshd: run, files, environ, listening pid, URLs."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.knobs.envfile import parse_environ
from servelab.errors import CommandTimeout, HostError
from servelab.io.hosts import host as hosts_module
from servelab.io.hosts.host import Host, backup_name, parse_proc_net_tcp
from servelab.io.http.client import probe
from tests.support import free_port
from tests.support.processes import http_server as http_server_process


@pytest.fixture
def http_server() -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    with http_server_process({"SERVELAB_TEST_KNOB": "42"}) as server:
        yield server


async def test_run_output_and_status(host: Host) -> None:
    result = await host.run("echo out; echo err >&2; exit 3", timeout=10)
    assert (result.exit_status, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    fed = await host.run("cat", timeout=10, input=b"stdin data")
    assert fed.stdout == "stdin data"


async def test_run_timeout_raises(host: Host) -> None:
    start = time.monotonic()
    with pytest.raises(CommandTimeout) as info:
        await host.run("sleep 20", timeout=0.5)
    assert time.monotonic() - start < 5
    assert "timed out after 0.5s" in str(info.value)
    assert isinstance(info.value, TimeoutError)


async def test_write_atomic_backup_and_read(host: Host, tmp_path: Path) -> None:
    target = tmp_path / "decode.env"
    assert await host.write_file_atomic(str(target), b"K=1\n") is None
    os.chmod(target, 0o640)
    backup = await host.write_file_atomic(str(target), b"K=2\n")
    assert backup is not None and backup.startswith(f"{target}.bak-")
    assert Path(backup).read_bytes() == b"K=1\n"
    assert await host.read_file(str(target)) == b"K=2\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert await host.write_file_atomic(str(target), b"K=3\n", backup=False) is None
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


async def test_read_missing_file_is_host_error(host: Host, tmp_path: Path) -> None:
    with pytest.raises(HostError) as info:
        await host.read_file(str(tmp_path / "missing"))
    assert "missing" in str(info.value)


async def test_exists_and_listdir(host: Host, tmp_path: Path) -> None:
    (tmp_path / "a.env").write_text("K=1\n")
    (tmp_path / ".hidden").write_text("")
    (tmp_path / "with space").mkdir()
    assert await host.exists(str(tmp_path / "a.env"))
    assert await host.exists(str(tmp_path / "with space"))
    assert not await host.exists(str(tmp_path / "missing"))
    assert sorted(await host.listdir(str(tmp_path))) == [".hidden", "a.env", "with space"]
    with pytest.raises(HostError) as info:
        await host.listdir(str(tmp_path / "missing"))
    assert "missing" in str(info.value)


async def test_environ_and_listening_pid(
    host: Host, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, proc = http_server
    assert await host.listening_pid(port) == proc.pid
    assert await host.listening_pid(free_port()) is None
    environ = parse_environ(await host.read_environ(proc.pid))
    assert environ["SERVELAB_TEST_KNOB"] == "42"


async def test_http_url_reaches_the_service(
    host: Host, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, _ = http_server
    url = await host.http_url(f"http://127.0.0.1:{port}/")
    assert (url == f"http://127.0.0.1:{port}/") == host.is_local
    result = await probe(url, timeout=5)
    assert result.status == 200
    assert await host.http_url(f"http://127.0.0.1:{port}/") == url  # forward reused


def test_backup_name_and_proc_net_parse() -> None:
    from datetime import UTC, datetime

    stamp = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert backup_name("/e/d.env", stamp) == "/e/d.env.bak-20260102T030405.000006Z"
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 12345 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:7530 0100007F:9999 01 00000000:00000000 00:00000000 00000000     0 "
        "       0 999 1 0000000000000000 100 0 0 10 0\n"
    )
    assert parse_proc_net_tcp(table, 30000) == {"12345"}
    assert parse_proc_net_tcp(table, 30001) == set()


def test_public_api() -> None:
    for name in hosts_module.__all__:
        assert hasattr(hosts_module, name)


async def test_makedirs_and_remove(host: Host, tmp_path: Path) -> None:
    where = tmp_path / "state" / "backups" / "decode"
    await host.makedirs(str(where))
    await host.makedirs(str(where))  # already there: fine
    assert where.is_dir() and where.stat().st_mode & 0o077 == 0
    (where / "x").write_text("1")
    await host.remove(str(where / "x"))
    await host.remove(str(where / "x"))  # already gone: fine
    assert not (where / "x").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(HostError):
        await host.makedirs(str(tmp_path / "file" / "sub"))
