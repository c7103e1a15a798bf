"""``--concurrency`` names at most 64 levels (issue 38), in every command that takes it, real
processes: ``bench --concurrency "$(seq -s, 1 5000)"`` ran 361 levels in 60 s before, ``tune
--plan`` with 20,000 levels took 9 s and printed a 20,000-row table; now each is a usage error
(exit 2) naming the option, the count and the most allowed, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_port, run_cli
from tests.support.specs import write_pd_spec


def _levels(count: int) -> str:
    return ",".join(map(str, range(1, count + 1)))


@pytest.mark.parametrize("count", [65, 20_000])
def test_more_levels_than_the_most_are_refused_by_every_command(tmp_path: Path, count: int) -> None:
    spec = str(write_pd_spec(tmp_path))
    commands = [
        ["bench", "--url", f"http://127.0.0.1:{free_port()}", "--requests", "2"],
        ["ab", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=256,512"],
        ["tune", "-f", spec, "--plan", "--knob", f"decode:{DEFAULT_KNOB}=256,384,512"],
    ]
    for argv in commands:
        done = run_cli(*argv, "--concurrency", _levels(count), timeout=60)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "Invalid value for '--concurrency'" in done.stderr, done.stderr
        assert f"names {count:,} levels, over the most allowed, 64" in done.stderr
        assert done.stdout == "" and "Traceback" not in done.stderr


def test_the_most_levels_are_taken(tmp_path: Path) -> None:
    """64 levels (a trailing comma too) pass the option: bench goes on to its server, not there."""
    port = free_port()
    done = run_cli("bench", "--url", f"http://127.0.0.1:{port}", "--requests", "2",
                   "--concurrency", _levels(64) + ",", timeout=60)  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f"127.0.0.1:{port}" in done.stderr and "--concurrency" not in done.stderr
