"""Every worker of the 2P2D example reached, by which real counter: without the engines' own
``/metrics`` (every worker's 404, as SGLang without ``--enable-metrics``) the real sglang-router's
per-worker counter proves each; without that too, each worker is unknown and verify fails,
saying why. The simulator's extras are off: nothing of servelab's own is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from servelab.core.verify.checks import CheckCode
from servelab.core.verify.e2e import WorkerReach
from servelab.core.verify.served import Gap, Signal
from servelab.io.specfile import load_spec
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from servelab.sim.settings import ENV_EXTRAS
from tests.support import free_port
from tests.support.xpyd import write_2p2d_spec

WORKERS = ["prefill-1", "prefill-2", "decode-1", "decode-2"]


@pytest.mark.timeout(300)
async def test_the_routers_counter_proves_each_worker_and_none_is_unknown_and_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_EXTRAS, "")
    spec_path, ports = write_2p2d_spec(tmp_path)
    for env in (tmp_path / "env").glob("*.env"):  # every engine's /metrics answers 404
        env.write_text(env.read_text() + "SERVELAB_SIM_NO_METRICS=1\n")
    # the same deployment, its router's Prometheus port named wrong: nothing answers there
    blind = tmp_path / "blind.toml"
    blind.write_text(spec_path.read_text().replace(str(ports[7]), str(free_port())))
    async with Operation(load_spec(spec_path)) as op:
        assert (await deploy.up(op)).ok
        try:
            seen = await verify(op, layers=("e2e",))
            unseen = await verify(load_spec(blind), layers=("e2e",))
        finally:
            await deploy.down(op)
    reached = {c.service: c for c in seen.checks if c.code is CheckCode.E2E_WORKER_REACHED}
    assert sorted(reached) == sorted(WORKERS) and seen.ok, [check_detail(c) for c in seen.checks]
    for check in reached.values():
        assert isinstance(check.data, WorkerReach) and check.data.signal is Signal.ROUTER
        assert check.data.counter == "smg_worker_cb_outcomes_total"
        assert check_detail(check).startswith("reached through router: the router's smg_worker")
    uncounted = [c for c in unseen.checks if c.code is CheckCode.E2E_WORKER_UNCOUNTED]
    assert sorted(c.service for c in uncounted) == sorted(WORKERS) and not unseen.ok
    for check in uncounted:
        assert isinstance(check.data, WorkerReach) and check.data.gap is Gap.NO_METRICS
        assert not check.ok and check_detail(check).startswith("unknown: its /metrics did not")
        assert check.data.requests_sent == 0  # no request can count it: none is sent
