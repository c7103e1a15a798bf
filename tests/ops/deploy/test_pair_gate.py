"""``up`` and ``restart`` run the P/D pair layer once their services are ready: a prefill with
page size 64 and a decode with 32 fail both before any request, naming both values."""

from __future__ import annotations

from pathlib import Path

from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import CheckCode
from servelab.io.specfile import load_spec
from servelab.ops.deploy import deploy
from servelab.report.deploy import render_deploy, render_restart
from tests.support.processes import live_procs_under
from tests.support.specs import PdPorts, write_pd_spec


async def test_up_and_restart_fail_on_a_mismatched_pair(tmp_path: Path) -> None:
    ports = PdPorts.free(proxy=False)
    path = write_pd_spec(tmp_path, time_scale=0.02, ports=ports, knobs=(),
                         decode_toml='args = ["--page-size", "32"]\n')  # fmt: skip
    text = path.read_text().replace(
        f"bootstrap_port = {ports.bootstrap}\n",
        f'bootstrap_port = {ports.bootstrap}\nargs = ["--page-size", "64"]\n',
    )
    path.write_text(text)
    loaded = load_spec(path)
    try:
        report = await deploy.up(loaded)
        assert all(step.ok for step in report.steps), encode(report)
        assert not report.ok
        assert [c.code for c in report.pair] == [CheckCode.PAIR_MISMATCH]
        assert encode(report)["pair"][0]["code"] == "pair.mismatch"
        shown = render_deploy(report)
        assert "up: FAILED" in shown and "page size 64" in shown and "vs 32" in shown
        restarted = await deploy.restart(loaded, ["decode"])
        assert restarted.verification is not None and not restarted.ok
        codes = [c.code for c in restarted.verification.failures]
        assert CheckCode.PAIR_MISMATCH in codes
        assert "page size 64" in render_restart(restarted)
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []
