"""One operation context per command: one SSH connection per host, counted by a real sshd.

The deployment's prefill and decode live on host ``remote``, its router on host ``remote2``; both
reach the same loopback sshd, whose own log (``Accepted publickey`` lines, server side) counts the
connections. An A/B arm visit (set the knob, co-restart, verify config + live + e2e, read the value
back live) and a whole A/B each open exactly one connection per host.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.load.workload import LengthDist
from servelab.core.verify.record import VerificationRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.ab.ab import _make_live, run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.context import Operation, operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import diff_knob, get_knob, live_knob, set_knob
from servelab.ops.verify.verify import verify
from tests.support.progress import lines
from tests.support.specs import PdPorts, write_pd_spec
from tests.support.sshd import SshdServer


def _two_host_spec(root: Path, sshd: SshdServer) -> LoadedSpec:
    """Prefill and decode on ``remote``, the router on ``remote2`` (the same sshd)."""
    spec = write_pd_spec(
        root,
        ports=PdPorts.free(proxy=False),
        time_scale=0.02,
        host="remote",
        hosts_toml=sshd.host_toml("remote") + sshd.host_toml("remote2"),
        state_dir=str(root / "remote-state"),
        env_dir=str(root / "env"),
    )
    head, router = spec.read_text().split("[services.router]")
    spec.write_text(head + "[services.router]" + router.replace('"remote"', '"remote2"', 1))
    loaded = load_spec(spec)
    assert loaded.spec.services["router"].host == "remote2"
    return loaded


@pytest.fixture
async def remote(tmp_path: Path, sshd: SshdServer) -> AsyncIterator[LoadedSpec]:
    loaded = _two_host_spec(tmp_path, sshd)
    await deploy.up(loaded)
    try:
        yield loaded
    finally:
        await deploy.down(loaded)


def _ab_config() -> AbConfig:
    bench = BenchConfig(
        url="",
        concurrencies=(1,),
        requests=2,
        input_len=LengthDist("fixed", 16),
        output_len=LengthDist("fixed", 4),
        warmup=0,
        idle_timeout_s=30,
    )
    return AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=1)


@pytest.mark.timeout(180)
async def test_an_arm_visit_opens_one_ssh_connection_per_host(
    remote: LoadedSpec, sshd: SshdServer, tmp_path: Path
) -> None:
    messages: list[str] = []
    before = sshd.logins()
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        async with Operation(remote, ledger=ledger, progress=lines(messages)) as op:
            vid, live, _pair = await _make_live(op, _ab_config(), "256", "measure the connections")
            diff = await diff_knob(op, "decode", DEFAULT_KNOB)
            assert sorted(op.hosts) == ["remote", "remote2"]
        assert op.hosts == {}  # closed together
        assert vid is not None and ledger.get(VerificationRecord, vid) is not None
    assert sshd.logins() - before == 2  # one per host: remote and remote2
    assert live == "256" and (diff.file, diff.live, diff.backup) == ("256", "256", "512")
    assert any("verified live" in m for m in messages)
    assert not any(m.startswith("reading the env file") for m in messages)  # verify kept quiet


@pytest.mark.timeout(240)
async def test_a_whole_ab_opens_one_ssh_connection_per_host(
    remote: LoadedSpec, sshd: SshdServer
) -> None:
    before = sshd.logins()
    result = await run_ab(remote, _ab_config())
    assert sshd.logins() - before == 2
    assert [v.live_value for v in result.visits] == ["256", "512"] and result.restored
    # calls given a bare spec open their own operation: one connection each, nothing shared
    before = sshd.logins()
    assert await get_knob(remote, "decode", DEFAULT_KNOB) == "512"
    assert await live_knob(remote, "decode", DEFAULT_KNOB) == "512"
    assert sshd.logins() - before == 2


async def test_nested_calls_reuse_the_callers_hosts(tmp_path: Path) -> None:
    loaded = load_spec(write_pd_spec(tmp_path))
    async with Operation(loaded) as op:
        host = op.host("decode")
        async with operation(op) as inner:
            assert inner.host("decode") is host and inner.spec is loaded.spec
        quiet = op.quiet()
        assert quiet.host("prefill") is op.host("prefill")
        assert op.host("decode") is host  # the inner block did not close it
    assert op.hosts == {}
    async with operation(loaded) as fresh:
        assert fresh.loaded is loaded and fresh.ledger is None


async def test_a_restart_starts_with_the_env_file_the_operation_wrote(tmp_path: Path) -> None:
    loaded = load_spec(write_pd_spec(tmp_path, time_scale=0.02, knob="512"))
    path = str(loaded.env_file("decode"))
    await deploy.up(loaded)
    try:
        async with Operation(loaded) as op:
            assert op.written_env("decode", path) is None
            change = await set_knob(op, "decode", DEFAULT_KNOB, "256")
            assert op.written_env("decode", path) == Path(path).read_bytes()
            report = await deploy.restart(op, ["decode"], verify_after=False)
            assert report.ok and change.restart_needed
            proof = await verify(op, ["decode"], layers=("config", "live"))
            assert proof.ok and await live_knob(op, "decode", DEFAULT_KNOB) == "256"
    finally:
        await deploy.down(loaded)
