"""An arm whose pair layer fails is the arm's finding: measured, said, never kept.

A decode at ``--context-length=2048`` beside a prefill at the model's 163,840 comes up, serves
short prompts and passes config, live and e2e, but its pair cannot hand off KV (``verify`` and
``restart`` fail it: wrong answers or failed requests with no error). ``ab --keep candidate`` once
called both arms "verified live" and left 2048 running; the arm is now said to be live but not
verified, it is measured, and the original value is put back (real simulated workers, the real
router).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from servelab.core.ab.result import kept_value
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.knobs.events import KnobVerifiedLive
from servelab.core.load.workload import LengthDist
from servelab.core.progress import ProgressEvent
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.ab.ab import run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.deploy import deploy
from servelab.ops.knob import diff_knob
from servelab.report.progress import describe_progress
from tests.support.specs import write_pd_spec

CONTEXT = "--context-length"


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[LoadedSpec]:
    spec = write_pd_spec(tmp_path, time_scale=0.05, name="pair-arm", knobs=(DEFAULT_KNOB, CONTEXT),
                         decode_env="SGLANG_ARGS=\n")  # fmt: skip
    text = spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\n', 1
    )
    # the prefill runs at the model's context length, said on its command line (reported)
    text = text.replace("bootstrap_port", 'args_env = "SGLANG_ARGS"\nbootstrap_port', 1)
    spec.write_text(text)
    with (tmp_path / "env" / "prefill.env").open("a") as env:
        env.write("SGLANG_ARGS=--context-length 163840\n")
    loaded = load_spec(spec)
    try:
        report = await deploy.up(loaded)
        assert all(step.ok for step in report.steps)
        yield loaded
    finally:
        await deploy.down(loaded)


@pytest.mark.timeout(300)
async def test_an_arm_whose_pair_fails_is_measured_said_and_never_kept(stack: LoadedSpec) -> None:
    bench = BenchConfig(url="", concurrencies=(1,), requests=4,
                        input_len=LengthDist("fixed", 128), output_len=LengthDist("fixed", 16),
                        warmup=0, idle_timeout_s=60)  # fmt: skip
    cfg = AbConfig("decode", CONTEXT, "163840", "2048", bench, repeat=1, keep="candidate")
    events: list[ProgressEvent] = []
    result = await run_ab(stack, cfg, progress=events.append)
    by_arm = {v.arm: v for v in result.visits}
    assert set(by_arm) == {"163840", "2048"}
    assert by_arm["163840"].pair_failed is None
    assert by_arm["2048"].pair_failed == ("pair decode: pair.mismatch",)
    assert by_arm["2048"].throughput  # measured all the same
    said = [
        describe_progress(e)
        for e in events
        if isinstance(e, KnobVerifiedLive) and e.value == "2048"
    ]
    assert (
        said
        and "live but not verified: its pair layer failed (pair decode: pair.mismatch" in said[0]
    )
    assert "verified live (" not in said[0]
    # never kept, whichever way it is named: the original (unset) is put back
    assert result.kept is None and result.restored
    assert kept_value("2048", result) is None and kept_value("baseline", result) == "163840"
    assert (await diff_knob(stack, "decode", CONTEXT)).live is None
