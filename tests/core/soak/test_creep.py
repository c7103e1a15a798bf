"""The creep rule (pure): a gauge that climbs and never returns to its floor when idle creeps; a
healthy sawtooth, one jump, a wobble, a rise that comes back or too short a run does not. Creep
is a finding at the layer that creeps even when nothing failed; its words."""

from __future__ import annotations

import random

import pytest

import servelab.core.soak.creep as creep_mod
from servelab.core.soak.creep import (
    KV_RISE,
    MIN_SAMPLES,
    RSS_RISE,
    RULE_CREEP,
    creep_evidence,
    creeping,
    crept,
    fit,
)
from servelab.core.soak.diagnose import diagnosis
from servelab.core.soak.evidence import SoakEvidence
from servelab.core.telemetry.layers import Layer
from servelab.core.telemetry.rules import FIRED, QUIET, ServerView
from servelab.core.telemetry.summary import RunTelemetry, SourceTelemetry
from servelab.report.soak.creep import CREEP_ADVICE, creep_text, only_creep

QUEUE = "sglang:num_decode_transfer_queue_reqs"
KV = "sglang:token_usage"
SERIES = '{engine_type="decode",model_name="m"}'


def _leak(n: int = 60, per_s: float = 0.3, seed: int = 1) -> list[tuple[float, float]]:
    """A queue that gains a ghost now and then, with live requests on top between rounds."""
    rng, ghosts, out = random.Random(seed), 0, []
    for t in range(n):
        ghosts += rng.random() < per_s
        busy = 2 if t % 3 and t < n - 4 else 0  # idle every third second and at the end
        out.append((float(t), float(ghosts + busy)))
    return out


def _sawtooth(n: int = 60, seed: int = 2) -> list[tuple[float, float]]:
    """A healthy gauge: busy during rounds (more and more as contexts grow), back to 0 between."""
    rng = random.Random(seed)
    return [
        (float(t), 0.0 if t % 3 == 0 or t >= n - 4 else t / 20 + rng.random()) for t in range(n)
    ]


def test_public_api_is_explicit() -> None:
    for name in creep_mod.__all__:
        assert hasattr(creep_mod, name), name


def test_a_leak_creeps_and_its_oldest_entry_only_ages() -> None:
    f = fit(_leak())
    assert f is not None and f.samples == 60
    assert f.start <= 1 and f.end >= 10 and f.steps >= 3 and f.slope_per_h > 0
    assert list(f.floors) == sorted(f.floors)
    assert f.stuck_s > 50  # never back at its starting floor since the first ghost
    assert creeping(f, 1.0)


def test_a_healthy_sawtooth_with_growing_rounds_does_not_creep() -> None:
    f = fit(_sawtooth())
    assert f is not None and f.end == f.start == 0
    assert not creeping(f, 1.0) and not creeping(f, KV_RISE)


def test_one_jump_a_rise_that_comes_back_and_a_wobble_do_not_creep() -> None:
    jump = [(float(t), 0.0 if t < 30 else 5.0) for t in range(60)]  # a wedge: one step
    back = [(float(t), t / 10 if t < 56 else 0.0) for t in range(60)]  # returns once idle
    wobble = [(float(t), [3.0, 0.0, 4.0, 1.0, 6.0, 2.0][t // 10]) for t in range(60)]
    for points in (jump, back, wobble):
        f = fit(points)
        assert f is not None and not creeping(f, 1.0), points


def test_too_short_a_run_is_not_judged() -> None:
    assert fit(_leak(MIN_SAMPLES - 1)) is None
    assert fit(_leak(MIN_SAMPLES)) is not None


def _source(
    service: str, role: str, gauges: dict[str, list[tuple[float, float]]]
) -> SourceTelemetry:
    return SourceTelemetry(service, "engine", f"http://{service}/metrics", "ok", scrapes=60,
                           duration_s=60.0, gauges=gauges, role=role)  # fmt: skip


def _view(*sources: SourceTelemetry) -> ServerView:
    return ServerView(RunTelemetry("scrape", 60.0, sources), {s.service: s.role for s in sources})


def test_a_creeping_decode_is_a_finding_at_the_decode_with_nothing_failed() -> None:
    usage = [(t, v / 500) for t, v in _leak()]
    decode = _source("decode", "decode", {QUEUE + SERIES: _leak(), KV + SERIES: usage})
    prefill = _source("prefill", "prefill", {KV + SERIES: [(t, v / 50) for t, v in _sawtooth()]})
    view = _view(decode, prefill)
    readings = {e.subject: e for e in creep_evidence(view)}
    assert readings["prefill"].state == QUIET
    fired = readings["decode"]
    assert (fired.state, fired.points_at, fired.worker) == (FIRED, Layer.DECODE_TRANSFER, "decode")
    kinds = {(c.series, c.kind) for c in fired.cites}
    assert {(QUEUE, "rise"), (QUEUE, "per_hour"), (QUEUE, "oldest_s"), (KV, "rise")} <= kinds
    assert crept(creep_evidence(view), Layer.DECODE_TRANSFER)
    found = diagnosis(SoakEvidence(via_proxy=False), view).findings
    assert [(f.layer, f.worker) for f in found] == [(Layer.DECODE_TRANSFER, "decode")]
    assert found[0].supporting == (f"telemetry.{RULE_CREEP}.decode",)
    assert only_creep(found[0])
    assert "CREEPING" in creep_text(fired) and "only ageing" in creep_text(fired)
    assert "never return to their floor" in CREEP_ADVICE


def test_a_healthy_run_names_nothing_and_memory_needs_a_real_rise() -> None:
    rss = [(float(t), 400e6 + (t % 5) * 1e6 + t * 0.2e6) for t in range(60)]  # +12 MB drift
    decode = _source("decode", "decode", {QUEUE + SERIES: [(t, 0.0) for t, _ in _sawtooth()],
                                          "process_resident_memory_bytes": rss})  # fmt: skip
    view = _view(decode)
    assert [e.state for e in creep_evidence(view)] == [QUIET]
    assert diagnosis(SoakEvidence(via_proxy=False), view).findings == ()
    grows = [(t, 400e6 + t * 2e6) for t, _ in rss]  # +118 MB, 30%: creeps
    f = fit(grows)
    assert (
        f is not None and f.end - f.start > RSS_RISE and creeping(f, max(RSS_RISE, 0.1 * f.start))
    )


@pytest.mark.parametrize("role", ["", "unified"])
def test_an_engine_without_a_role_or_telemetry_is_not_judged(role: str) -> None:
    assert creep_evidence(_view(_source("e", role, {QUEUE: _leak()}))) == ()
    assert creep_evidence(None) == ()
    assert creep_evidence(ServerView(None)) == ()


def test_gauges_are_read_when_the_engine_is_idle_so_busy_growth_is_not_a_leak() -> None:
    running = [(float(t), 0.0 if t % 3 == 0 or t >= 56 else 2.0) for t in range(60)]
    busy = {t: v > 0 for t, v in running}
    # contexts grow round after round: KV in use while busy climbs, and is freed once idle
    healthy = [(t, 0.01 * t if busy[t] else 0.0) for t, _ in running]
    ghosts = [(t, v + 0.002 * (t // 6)) for t, v in healthy]  # ... and a leak on top
    runs = "sglang:num_running_reqs" + SERIES
    for usage, fires in ((healthy, False), (ghosts, True)):
        decode = _source("decode", "decode", {runs: running, KV + SERIES: usage})
        (reading,) = creep_evidence(_view(decode))
        assert (reading.state == FIRED) is fires, reading
    never_idle = [(t, 2.0) for t, _ in running]
    climbing = [(t, 0.01 * t) for t, _ in running]
    decode = _source("decode", "decode", {runs: never_idle, KV + SERIES: climbing})
    # never idle: its KV usage is not judged (the running requests are, and hold steady)
    assert [e.state for e in creep_evidence(_view(decode))] == [QUIET]
