"""`servelab ab` on the embedded topology through the real router: the simulator tells the story.

512 against 256 for the decode's SGLANG_SM120_MMA_TARGET_CTAS at C64/C80/C96 lands in the bands of
shared/notes/sim-model.md (C64 +8..+18%, C80 -2..+5%, C96 +2..+10%) and the C96 < C80 anomaly is
flagged for 256 only. Each arm is proven live before it is measured; the original value comes back.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.ab.compare import Verdict
from servelab.core.ab.design import Order
from servelab.core.ab.events import AbVisitStarted
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbResult, Stop
from servelab.core.ab.sequential import Boundary
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.knobs.events import KnobVerifiedLive
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.workload import LengthDist
from servelab.core.progress import ProgressEvent
from servelab.errors import BenchError, KnobError
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.ab.ab import resume_ab, run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.deploy import deploy
from servelab.ops.knob import diff_knob
from servelab.report.ab import ab_markdown
from tests.support import free_ports
from tests.support.deployed import deployed, knob_live
from tests.support.old_rows import AB_SESSION_BEFORE_CODEC, FIRST_AB_RUN
from tests.support.progress import lines
from tests.support.specs import write_pd_spec

BANDS = {64: (1.08, 1.18), 80: (0.98, 1.05), 96: (1.02, 1.10)}


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[LoadedSpec]:
    # 0.5 is the smallest time scale at which the simulator's ratios are stable on 2 cores
    # (benchmarks/sim_calibration.py). No cold start: at 0.5 each arm's e2e verification waited
    # 8.5 s (17 modelled) for its first request after the restart, a wait never measured.
    loaded = load_spec(
        write_pd_spec(tmp_path, knob="512", time_scale=0.5, worker_env="SERVELAB_SIM_WARMUP_S=0\n")
    )
    await deploy.up(loaded)
    try:
        yield loaded
    finally:
        await deploy.down(loaded)


@pytest.fixture(scope="module")
def _quick_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    """One stack (time scale 0.05, 512 live) for the module's short A/Bs: each used to start its
    own identical one."""
    root = tmp_path_factory.mktemp("ab-quick")
    with deployed(load_spec(write_pd_spec(root, knob="512", time_scale=0.05))) as loaded:
        yield loaded


@pytest.fixture
async def quick(_quick_stack: LoadedSpec) -> AsyncIterator[LoadedSpec]:
    """The shared stack, 512 live as the test starts and after it (``--keep`` leaves 384)."""
    async with knob_live(_quick_stack, "decode", DEFAULT_KNOB, "512"):
        yield _quick_stack


def _config(repeat: int, concurrencies: tuple[int, ...], requests: int) -> AbConfig:
    bench = BenchConfig(
        url="",
        concurrencies=concurrencies,
        requests=requests,
        input_len=LengthDist("fixed", 128),
        output_len=LengthDist("fixed", 64),
        warmup=8,
        idle_timeout_s=60,
    )
    return AbConfig("decode", DEFAULT_KNOB, "256", "512", bench, repeat=repeat)


@pytest.mark.solo
@pytest.mark.timeout(600)
async def test_the_knob_ab_tells_the_reference_story(stack: LoadedSpec, tmp_path: Path) -> None:
    messages: list[str] = []
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = await run_ab(
            stack, _config(3, (64, 80, 96), 384), ledger=ledger, progress=lines(messages)
        )
        recorded = ledger.get(AbRunRecord, result.ab_id) if result.ab_id is not None else None
    table = ab_markdown(result)
    ratios = {c.concurrency: c.ratio for c in result.comparisons}
    for conc, (low, high) in BANDS.items():
        assert low <= ratios[conc] <= high, table
    assert {c.concurrency: c.verdict for c in result.comparisons}[64] == Verdict.BETTER, table
    flagged = {(a.arm, a.concurrency) for a in result.anomalies}
    assert ("256", 96) in flagged, table
    assert not any(arm == "512" for arm, _ in flagged), table
    # every visit was proven live with its own value before it was measured, in ABBA order
    assert [v.live_value for v in result.visits] == [v.arm for v in result.visits]
    assert [v.arm for v in result.visits] == ["256", "512", "512", "256", "256", "512"]
    assert all(v.verification_id is not None for v in result.visits)
    assert all(v.failed_requests == 0 for v in result.visits)
    assert any("verified live" in m for m in messages)
    # the original value is back, live
    assert result.restored
    assert (await diff_knob(stack, "decode", DEFAULT_KNOB)).live == "512"
    assert recorded is not None and recorded.result.comparisons


@pytest.mark.timeout(420)
async def test_until_decided_stops_early_on_a_clear_effect(tmp_path: Path) -> None:
    """A clear effect through the real router, looked at after every round: TARGET_CTAS 16
    against 512 at C2 (a 2-request batch's split-K GEMM launches too few CTAs to fill a wave at
    16: about +94% in the model). Pocock's repeated interval (looks 3..6) decides it before
    --max-rounds 6, so the A/B records fewer rounds, visits and minutes than its fixed counterpart
    of 6 rounds. C2 keeps the CPU light (the C64 effect drowns under a loaded machine's noise);
    at time scale 0.1 (0.25 took 157 s against 106 s side by side) four runs at load 8-9 decided
    at round 3, +86.4% [+81.9%, +91.1%] in one, far above the 1.3 asserted. No cold start (1.7 s
    for each arm's e2e verification, after its restart: never measured)."""
    no_cold_start = "SERVELAB_SIM_WARMUP_S=0\n"
    loaded = load_spec(
        write_pd_spec(tmp_path, knob="512", time_scale=0.1, worker_env=no_cold_start)
    )
    await deploy.up(loaded)
    try:
        bench = _config(1, (2,), 32).bench
        cfg = AbConfig("decode", DEFAULT_KNOB, "16", "512", bench, until_decided=True,
                       max_rounds=6)  # fmt: skip
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            result = await run_ab(loaded, cfg, ledger=ledger)
            recorded = ledger.get(AbRunRecord, result.ab_id) if result.ab_id is not None else None
    finally:
        await deploy.down(loaded)
    table = ab_markdown(result)
    rounds, decision = result.design.decided[2].rounds, result.design.decided[2].decision
    assert decision == Verdict.BETTER and rounds is not None, table
    assert result.design.stopped == Stop.DECIDED, table
    cost, fixed = result.design.cost, result.design.fixed_cost
    assert cost is not None and fixed is not None
    assert cost.rounds == rounds == result.design.rounds_run < fixed.rounds == cfg.max_rounds, table
    assert cost.visits == 2 * rounds < fixed.visits == 2 * cfg.max_rounds
    assert cost.minutes < fixed.minutes and cost.gpu_minutes < fixed.gpu_minutes
    assert [v.arm for v in result.visits] == ["16", "512", "512", "16", "16", "512", "512", "16",
                                              "16", "512"][: 2 * rounds]  # fmt: skip
    (c2,) = result.comparisons
    assert c2.ratio > 1.3 and c2.verdict == Verdict.BETTER, table
    assert c2.sequential is not None and c2.sequential.looks == cfg.max_rounds
    assert c2.sequential.ratio_ci[0] > 1.0 and "Pocock" in table
    assert result.restored
    assert recorded is not None and recorded.result.design.rounds_run == rounds
    assert recorded.result.design.boundary == "pocock"


async def test_same_value_on_both_arms_is_refused(tmp_path: Path) -> None:
    loaded = load_spec(write_pd_spec(tmp_path))
    cfg = AbConfig("decode", DEFAULT_KNOB, "512", "512", _config(1, (1,), 1).bench)
    with pytest.raises(BenchError, match="same value"):
        await run_ab(loaded, cfg)


@pytest.mark.timeout(120)
async def test_cancelled_ab_restores_the_original_value(quick: LoadedSpec) -> None:
    task: asyncio.Task[object] | None = None

    def progress(event: ProgressEvent) -> None:
        # Ctrl-C while the 256 arm is live and being measured.
        if isinstance(event, KnobVerifiedLive) and event.value == "256" and task is not None:
            asyncio.get_running_loop().call_later(0.3, task.cancel)

    cfg = _config(1, (2,), 400)
    task = asyncio.create_task(run_ab(quick, cfg, progress=progress))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await diff_knob(quick, "decode", DEFAULT_KNOB)).live == "512"


@pytest.mark.timeout(120)
async def test_an_arm_that_is_not_live_names_its_failed_checks_by_code(tmp_path: Path) -> None:
    """The service drops the knob from its own environment: the arm is never live."""
    (port,) = free_ports(1)
    (tmp_path / "svc.env").write_text(f"{DEFAULT_KNOB}=512\n")
    start = f"exec env -u {DEFAULT_KNOB} {sys.executable} -m http.server {port} --bind 127.0.0.1"
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        f"""state_dir = "state"
[services.svc]
role = "proxy"
url = "http://127.0.0.1:{port}"
start = "{start}"
start_timeout_s = 0.5
ready_path = "/"
ready_timeout_s = 20
env_file = "svc.env"
knobs = ["{DEFAULT_KNOB}"]
"""
    )
    loaded = load_spec(spec)
    await deploy.up(loaded)
    try:
        cfg = AbConfig("svc", DEFAULT_KNOB, "256", "384", _config(1, (1,), 1).bench)
        with pytest.raises(BenchError) as info:
            await run_ab(loaded, cfg)
    finally:
        await deploy.down(loaded)
    message = str(info.value)
    assert message.startswith(f"arm svc:{DEFAULT_KNOB}=256 is not live (")
    assert message.endswith("): arm not measured")
    # the e2e check cannot even start: an http.server lists no model (no placeholder is sent)
    assert "live svc: live.restart_needed" in message and "e2e svc: e2e.error" in message


def test_a_config_stored_by_older_servelab_reads() -> None:
    """The config the journal (servelab 0d7d9ad) and the first ``ab_runs`` rows stored: read
    back whole (a key the first did not store as its default), written again the same but for
    the keys added or changed since (``bench.headers``, ``bench.trace`` and ``metric`` with their
    defaults; ``keep``, a flag then, is now the value kept: its ``false`` reads as none)."""
    journalled = json.loads(AB_SESSION_BEFORE_CODEC["config"])
    cfg = decode(AbConfig, journalled)
    assert (cfg.baseline, cfg.candidate, cfg.order, cfg.boundary) == (
        "256", "512", Order.ABBA, Boundary.POCOCK
    )  # fmt: skip
    assert cfg.until_decided and cfg.rounds == 6 and cfg.bench.concurrencies == (80, 96)
    assert cfg.bench.input_len == LengthDist("fixed", 8)
    assert journalled["keep"] is False and cfg.keep is None
    bench = {**journalled["bench"], "headers": [], "trace": None}
    assert encode(cfg) == {**journalled, "keep": None, "metric": "throughput", "bench": bench}
    first = decode(AbConfig, json.loads(FIRST_AB_RUN["config"]))
    assert (first.repeat, first.rounds, first.order, first.bench.concurrencies) == (
        2, 2, Order.ABBA, (64, 80, 96)
    )  # fmt: skip
    with pytest.raises(ValueError, match="unknown order 'zigzag'"):
        replace(cfg, order="zigzag")


@pytest.mark.timeout(400)
async def test_an_interrupted_ab_resumes_from_the_journal(
    quick: LoadedSpec, tmp_path: Path
) -> None:
    """Cancelled while round 2 starts: the knob comes back; the resume keeps round 1's two visits
    (same bench runs), runs the rest of the ABBA plan, stops at --max-rounds, prices the design."""
    cfg = replace(_config(1, (2,), 12), until_decided=True, max_rounds=3)
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        task: asyncio.Task[AbResult] | None = None

        def progress(event: ProgressEvent) -> None:
            if isinstance(event, AbVisitStarted) and event.round_index == 1 and task:
                asyncio.get_running_loop().call_soon(task.cancel)

        task = asyncio.create_task(run_ab(quick, cfg, ledger=ledger, progress=progress))
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await diff_knob(quick, "decode", DEFAULT_KNOB)).live == "512"
        (session,) = [AbJournal(ledger).get(1)]
        assert session is not None and session.status == SessionStatus.INTERRUPTED
        kept = [v.bench_run_ids for v in session.visits]
        assert [v.arm for v in session.visits] == ["256", "512"]
        result = await resume_ab(quick, 1, ledger=ledger)
        recorded = ledger.get(AbRunRecord, result.ab_id) if result.ab_id is not None else None
        finished = AbJournal(ledger).get(1)
    assert result.design.resumed and result.restored
    assert [v.bench_run_ids for v in result.visits[:2]] == kept
    assert [v.arm for v in result.visits] == ["256", "512", "512", "256", "256", "512"]
    assert [v.order for v in result.visits[:4]] == ["256→512"] * 2 + ["512→256"] * 2
    assert [v.position for v in result.visits] == list(range(6))
    assert result.design.stopped in (Stop.MAX_ROUNDS, Stop.DECIDED)
    cost, fixed = result.design.cost, result.design.fixed_cost
    assert cost is not None and fixed is not None
    assert cost.rounds == 3 and fixed.rounds == 3
    assert finished is not None and finished.status == SessionStatus.FINISHED
    assert finished.ab_id == result.ab_id
    assert recorded is not None and len(recorded.result.visits) == 6
    assert recorded.result.design.order == "abba"
    assert "Visits in the order they ran" in ab_markdown(result)


@pytest.mark.timeout(300)
async def test_keep_leaves_the_value_it_names_live(quick: LoadedSpec) -> None:
    """``--keep 0256``: the arm visited first, named in another spelling, set, co-restarted and
    proven live at the end in the arm's own spelling, ``256`` (issue: ``--keep`` kept whichever
    arm the counterbalanced order visited last; the thirteenth pass: ``--keep 064`` kept a third
    spelling). A value that names neither arm is refused before anything runs."""
    cfg = replace(_config(1, (1,), 4), keep="384")
    with pytest.raises(KnobError, match="names neither arm"):
        await run_ab(quick, cfg)
    cfg = replace(cfg, keep="0256", bench=replace(cfg.bench, warmup=0))
    result = await run_ab(quick, cfg)
    assert result.kept == "256" and not result.restored
    assert (await diff_knob(quick, "decode", DEFAULT_KNOB)).live == "256"
    assert [v.arm for v in result.visits] == ["256", "512"]


def test_a_journal_written_with_the_keep_flag_reads_as_a_rule() -> None:
    bench = BenchConfig(url="")
    old = {**encode(AbConfig("decode", "K", "256", "512", bench)), "keep": True}
    assert decode(AbConfig, old).keep == "better"
    assert decode(AbConfig, {**old, "keep": False}).keep is None
    assert decode(AbConfig, {**old, "keep": "candidate"}).keep == "candidate"
