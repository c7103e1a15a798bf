"""Knob get/set/diff: atomic edits with backups, records, and live values from a real process."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.knobs.record import KnobChangeRecord
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.ledger.codec import encode
from servelab.errors import KnobError, SpecError
from servelab.io.hosts.discovery import find_process
from servelab.io.hosts.envfiles import latest_backup, read_env_file
from servelab.io.hosts.host import LocalHost
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.context import Operation
from servelab.ops.knob import diff_knob, get_knob, set_knob
from tests.support import free_port
from tests.support.processes import http_server
from tests.support.specs import SECRET, write_decode_spec
from tests.support.sshd import SshdServer

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"
ENV = f"# decode knobs\n{KNOB}=512\n\nSECRET_TOKEN={SECRET}\n"


def _spec(root: Path, port: int) -> LoadedSpec:
    spec = write_decode_spec(root, port, role="generic", start="true", knobs=(KNOB, "OTHER_KNOB"))
    return load_spec(spec)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "decode.env").write_text(ENV)
    return tmp_path


@pytest.fixture
def server(workdir: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """A real process listening on a free port, started with the env file's variables."""
    with http_server({KNOB: "512", "SECRET_TOKEN": SECRET}, cwd=workdir) as server:
        yield server


async def test_set_writes_atomically_with_backup_and_record(workdir: Path) -> None:
    loaded = _spec(workdir, free_port())
    path = workdir / "env" / "decode.env"
    with Ledger.open(workdir / "ledger.db") as ledger:
        change = await set_knob(
            loaded, "decode", KNOB, "256", reason="suspect", case_id=None, ledger=ledger
        )
        assert change.changed and change.old == "512" and change.new == "256"
        assert change.backup_path is not None and change.change_id is not None
        assert Path(change.backup_path).read_text() == ENV
        assert path.read_text() == ENV.replace("=512", "=256")  # comments and order kept
        assert not change.running and not change.restart_needed
        row = ledger.get(KnobChangeRecord, change.change_id)
        assert row is not None
        assert row is not None and (row.old, row.new, row.reason) == ("512", "256", "suspect")

        again = await set_knob(loaded, "decode", KNOB, "256", ledger=ledger)
        assert not again.changed and again.backup_path is None and again.change_id is None
        assert len(ledger.list(KnobChangeRecord, service="decode", name=KNOB)) == 1

        added = await set_knob(loaded, "decode", "OTHER_KNOB", "x y", ledger=ledger)
        assert added.old is None and await get_knob(loaded, "decode", "OTHER_KNOB") == "x y"
        removed = await set_knob(loaded, "decode", "OTHER_KNOB", None, ledger=ledger)
        assert removed.new is None and await get_knob(loaded, "decode", "OTHER_KNOB") is None
    backups = workdir / "state" / "backups" / "decode"
    assert await latest_backup(LocalHost(), str(path), str(backups)) == removed.backup_path
    assert len(list(backups.glob("decode.env-*/decode.env.bak-*"))) == 3
    assert sorted(p.name for p in (workdir / "env").iterdir()) == ["decode.env"]  # none beside
    for db in workdir.glob("ledger.db*"):
        assert SECRET.encode() not in db.read_bytes()


async def test_set_creates_a_missing_env_file_without_backup(tmp_path: Path) -> None:
    loaded = _spec(tmp_path, free_port())
    change = await set_knob(loaded, "decode", KNOB, "512")
    assert change.changed and change.old is None and change.backup_path is None
    assert (tmp_path / "env" / "decode.env").read_text() == f"{KNOB}=512\n"


async def test_only_declared_knobs_are_read_or_written(workdir: Path) -> None:
    loaded = _spec(workdir, free_port())
    with pytest.raises(KnobError, match="not a declared knob") as info:
        await get_knob(loaded, "decode", "SECRET_TOKEN")
    assert SECRET not in str(info.value)
    with pytest.raises(KnobError):
        await set_knob(loaded, "decode", "SECRET_TOKEN", "x")
    with pytest.raises(KnobError, match="newline"):
        await set_knob(loaded, "decode", KNOB, "1\nSECRET_TOKEN=x")
    with pytest.raises(SpecError, match="unknown service"):
        await get_knob(loaded, "nope", KNOB)
    assert (workdir / "env" / "decode.env").read_text() == ENV


async def test_unparsable_env_file_error_never_echoes_the_line(workdir: Path) -> None:
    (workdir / "env" / "decode.env").write_text(f"{KNOB}=512\nSECRET_TOKEN {SECRET}\n")
    with pytest.raises(KnobError, match=r"decode.env:2") as info:
        await read_env_file(LocalHost(), str(workdir / "env" / "decode.env"))
    assert SECRET not in str(info.value)
    assert await read_env_file(LocalHost(), str(workdir / "missing.env")) is None


async def test_diff_shows_file_backup_and_live_side_by_side(
    workdir: Path, server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, proc = server
    loaded = _spec(workdir, port)
    proc_ref = await find_process(loaded, "decode", LocalHost())
    assert proc_ref.pid == proc.pid and proc_ref.source == f"owner of port {port}"

    before = await diff_knob(loaded, "decode", KNOB)
    assert (before.file, before.backup, before.live) == ("512", None, "512")
    assert before.verdict == LiveVerdict.MATCH

    change = await set_knob(loaded, "decode", KNOB, "256", reason="try")
    assert change.running and change.restart_needed and change.live == "512"

    after = await diff_knob(loaded, "decode", KNOB)
    assert (after.file, after.backup, after.live) == ("256", "512", "512")
    assert after.verdict == LiveVerdict.DIFFERS and after.backup_path == change.backup_path
    assert SECRET not in json.dumps(encode(after)) + json.dumps(encode(change))

    back = await set_knob(loaded, "decode", KNOB, "512")
    assert back.running and not back.restart_needed


async def test_backup_identical_to_the_file_is_skipped(workdir: Path) -> None:
    """A restart copies env files aside; the diff still shows the value before the last change."""
    from servelab.io.hosts.host import backup_name

    loaded = _spec(workdir, free_port())
    change = await set_knob(loaded, "decode", KNOB, "256")
    path = workdir / "env" / "decode.env"
    restart_copy = Path(backup_name(str(path)))  # beside the file: an older servelab's copy
    restart_copy.write_bytes(path.read_bytes())
    backups = str(workdir / "state" / "backups" / "decode")
    assert await latest_backup(LocalHost(), str(path), backups) == str(restart_copy)
    diff = await diff_knob(loaded, "decode", KNOB)
    assert (diff.file, diff.backup, diff.backup_path) == ("256", "512", change.backup_path)


async def test_over_ssh_backups_go_to_the_remote_state_dir(
    tmp_path: Path, sshd: SshdServer
) -> None:
    """The env file on an SSH host: its backups go under the spec's (absolute) state dir there."""
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "decode.env").write_text(ENV)
    (tmp_path / "servelab.toml").write_text(
        f'name = "remote-knobs"\nstate_dir = "{tmp_path / "remote-state"}"\n'
        + sshd.host_toml("remote")
        + f'[services.decode]\nrole = "generic"\nhost = "remote"\n'
        f'url = "http://127.0.0.1:{free_port()}"\nstart = "true"\n'
        f'env_file = "{tmp_path / "env" / "decode.env"}"\nknobs = ["{KNOB}"]\n'
    )
    loaded = load_spec(tmp_path / "servelab.toml")
    async with Operation(loaded) as op:
        assert op.backup_dir("decode") == str(tmp_path / "remote-state" / "backups" / "decode")
        change = await set_knob(op, "decode", KNOB, "256")
        diff = await diff_knob(op, "decode", KNOB)
    assert change.backup_path is not None
    assert (
        Path(change.backup_path).parent.parent == tmp_path / "remote-state" / "backups" / "decode"
    )
    assert (diff.file, diff.backup, diff.backup_path) == ("256", "512", change.backup_path)
    assert sorted(p.name for p in (tmp_path / "env").iterdir()) == ["decode.env"]
