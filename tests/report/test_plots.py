"""A/B plots are real, deterministic PNGs."""

from __future__ import annotations

import struct

from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbResult
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode
from servelab.report import plots
from servelab.report.plots import ab_plot, arm_curve

AB = decode(
    AbRunRecord,
    {
        "id": 4,
        "at": "2026-01-01T00:00:00.000Z",
        "service": "decode",
        "knob": "K",
        "config": {},
        "result": {
            "arms": [
                {"label": "256", "value": "256", "throughput": {"96": [90, 92], "64": [100, 101]}},
                {"label": "512", "value": "512", "throughput": {"64": [113.0], "96": []}},
            ]
        },
    },
)


def test_public_api() -> None:
    assert set(plots.__all__) == {
        "ab_figure", "ab_plot", "arm_curve", "load_series", "load_ttft_plot", "run_phase_plot",
        "ttft_phase_plot", "tune_plot",
    }  # fmt: skip


def test_the_stacked_phase_plot_is_a_png_and_only_for_a_traced_run() -> None:
    bars = [("C1", {"router": 1.5, "prefill": 6.0}), ("C2", {"router": 2.0, "prefill": 9.0})]
    png = plots.ttft_phase_plot(bars, title="t")
    assert png.startswith(b"\x89PNG") and png == plots.ttft_phase_plot(bars, title="t")
    untraced = BenchRunRecord(1, "2026-12-01T00:00:00Z", None, {}, {"level": {}}, 0)
    assert plots.run_phase_plot(untraced) is None
    phases = {"prefill": {"p50": 6.0, "p90": 7.0, "p99": 8.0}}
    traced = BenchRunRecord(
        2, "2026-12-01T00:00:00Z", None, {}, {"traces": {"summary": {"phases_ms": phases}}}, 0
    )
    assert (plots.run_phase_plot(traced) or b"").startswith(b"\x89PNG")


def test_arm_curve_sorted_with_sigma_and_n() -> None:
    curve = arm_curve(AB.result.arms[0])
    assert [(c, m, n) for c, m, _s, n in curve] == [(64, 100.5, 2), (96, 91.0, 2)]
    assert arm_curve(AB.result.arms[1]) == [(64, 113.0, 0.0, 1)]


def test_ab_plot_is_a_deterministic_png() -> None:
    png = ab_plot(AB.result, title="A/B #4")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (640, 400)
    assert ab_plot(AB.result, title="A/B #4") == png
    empty = AbResult("decode", "K", "256", "512")
    assert ab_plot(empty, title="A/B #4") != png
