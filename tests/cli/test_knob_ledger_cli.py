"""``knob set`` never leaves a change unrecorded (issue 38, the tenth pass): a ledger that cannot
take a record (a read-only mount, a full disk) is refused in one line naming the ledger before
the env file is touched. Real processes, real mounts (root, as CI has)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.errors import StoreError
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import load_spec
from servelab.ops.knob import set_knob
from tests.support import free_port, run_cli
from tests.support.specs import write_decode_spec
from tests.support.tmpfs import fill, tmpfs

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.fixture(params=["read-only", "full"])
def unwritable_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A ledger (made, so it exists) on a 256 KiB tmpfs then remounted read-only, or filled."""
    with tmpfs(tmp_path / "led") as mount:
        with Ledger.open(mount / "l.db"):
            pass
        if request.param == "read-only":
            subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        else:
            fill(mount)
        yield mount / "l.db"


def test_knob_set_refuses_a_ledger_it_cannot_write_before_touching_the_file(
    tmp_path: Path, unwritable_ledger: Path
) -> None:
    write_decode_spec(tmp_path, free_port(), knobs=(KNOB,), env_text=f"{KNOB}=512\nOTHER=1\n")
    env = tmp_path / "env" / "decode.env"
    done = run_cli(
        "knob", "set", "decode", f"{KNOB}=256", "--ledger", str(unwritable_ledger),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(unwritable_ledger) in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert env.read_text() == f"{KNOB}=512\nOTHER=1\n"  # the file untouched
    assert not (tmp_path / "state" / "backups").exists()  # no backup taken either


class _CheckedEarlier(Ledger):
    """The real ledger, its pre-check taken as passed: the disk filled after it."""

    def check_writable(self) -> None:
        return None


async def test_a_record_that_fails_after_the_check_puts_the_file_back(
    tmp_path: Path, unwritable_ledger: Path
) -> None:
    spec = write_decode_spec(
        tmp_path, free_port(), knobs=(KNOB,), env_text=f"{KNOB}=512\nOTHER=1\n"
    )
    env = tmp_path / "env" / "decode.env"
    with _CheckedEarlier.open(unwritable_ledger) as ledger, pytest.raises((StoreError, OSError)):
        await set_knob(load_spec(spec), "decode", KNOB, "256", ledger=ledger)
    assert env.read_text() == f"{KNOB}=512\nOTHER=1\n"  # written, then put back
