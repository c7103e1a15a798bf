"""A ledger on a full disk is found before the load: ``bench`` and ``soak`` (as ``ab``, ``verify``
and ``case`` already did) fail in one line naming the ledger and send no request (issue: the soak
ran to its end, then printed only the write error). Real processes, a real full tmpfs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.ledger.ledger import Ledger
from tests.support import arun_cli
from tests.support.servers import SEEN, served, streaming_app
from tests.support.tmpfs import fill, tmpfs


@pytest.fixture
def full_ledger(tmp_path: Path) -> Iterator[Path]:
    """A ledger on a 256 KiB tmpfs that is then filled to the last byte."""
    with tmpfs(tmp_path / "tiny") as mount:
        with Ledger.open(mount / "l.db"):
            pass
        fill(mount)
        yield mount / "l.db"


async def _run(*args: str) -> tuple[int, str]:
    done = await arun_cli(*args, timeout=60)
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("bench", "--requests", "2", "--output-len", "4"),
        ("soak", "--sessions", "1", "--rounds", "1", "--max-tokens", "4", "--no-localize"),
    ],
    ids=lambda c: c[0],
)
async def test_a_full_ledger_is_refused_before_any_request(
    full_ledger: Path, command: tuple[str, ...]
) -> None:
    app = streaming_app(gap_s=0.001)
    async with served(app) as url:
        code, err = await _run(*command, "--url", url, "--ledger", str(full_ledger))
    assert code == 1, err
    assert str(full_ledger) in err and "full" in err and "Traceback" not in err
    assert app[SEEN].streams == 0
