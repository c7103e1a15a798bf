"""What an arm's failed put-back says is left to restart (``ops/armfailure.py``): the plan of its
:class:`~servelab.ops.deploy.results.RestartLeftDown` is what ``restart`` restarts, its files
compared by their identity on their host (issue 38): two services whose env files are a symbolic
link and its target read one file, so both are named (the paths as written named one). Real
files, a real operation (nothing started: the report is read from the spec and the files)."""

from __future__ import annotations

from pathlib import Path

from servelab.core.deploy.putback import KnobBack, PutBack
from servelab.errors import DeployError
from servelab.io.specfile import load_spec
from servelab.ops.armfailure import _left_down
from servelab.ops.context import operation
from tests.support.xpyd import write_2p2d_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


async def test_the_report_of_what_is_down_names_a_service_reading_a_linked_env_file(
    tmp_path: Path,
) -> None:
    spec_path, _ = write_2p2d_spec(tmp_path)
    env = tmp_path / "env"
    (env / "decode-2.env").unlink()
    (env / "decode-2.env").symlink_to("decode.env")
    found = [KnobBack("decode-1", KNOB, "512")]
    put = PutBack(down=("decode-1",), recovery=("servelab", "up", "-f", str(spec_path)))
    async with operation(load_spec(spec_path)) as op:
        report = await _left_down(op, found, put, DeployError("the arm failed"))
    assert report.plan == ["decode-1", "decode-2", "router"], report.plan
    assert report.down == ["decode-1"] and report.error is not None
    assert report.error.startswith("the arm failed; putting decode-1 "), report.error
