"""The pure performance model reproduces the reference incident's A/B of the knob."""

from __future__ import annotations

import dataclasses

import pytest

from servelab.sim import profile as prof
from servelab.sim.profile import (
    DEFAULT_PROFILE,
    HardwareProfile,
    ctas,
    decode_step_s,
    kv_transfer_s,
    prefill_s,
    steady_throughput,
    wave_efficiency,
)

P = DEFAULT_PROFILE
BANDS = {64: (0.08, 0.18), 80: (-0.02, 0.05), 96: (0.02, 0.10)}
SHAPES = [(128, 64), (128, 256), (512, 128), (1024, 256)]


def gain(c: int, in_len: int = 128, out_len: int = 64) -> float:
    return (
        steady_throughput(P, c, 512, in_len, out_len)
        / steady_throughput(P, c, 256, in_len, out_len)
        - 1
    )


def test_public_api() -> None:
    assert set(prof.__all__) >= {"HardwareProfile", "decode_step_s", "steady_throughput"}


def test_reference_defaults() -> None:
    assert P.sm_count == 188
    assert P.knob_name == "SGLANG_SM120_MMA_TARGET_CTAS"
    assert P.knob_default == 256
    assert 15 <= P.cold_start_s <= 18
    with pytest.raises(dataclasses.FrozenInstanceError):
        P.sm_count = 1  # type: ignore[misc]


@pytest.mark.parametrize(("in_len", "out_len"), SHAPES)
@pytest.mark.parametrize("c", [64, 80, 96])
def test_knob_gain_in_band(c: int, in_len: int, out_len: int) -> None:
    lo, hi = BANDS[c]
    assert lo <= gain(c, in_len, out_len) <= hi


def test_gains_close_to_the_incident() -> None:
    assert gain(64) == pytest.approx(0.128, abs=0.01)
    assert gain(96) == pytest.approx(0.057, abs=0.01)
    assert abs(gain(80)) < 0.02


@pytest.mark.parametrize(("in_len", "out_len"), SHAPES)
def test_c96_anomaly_and_its_fix(in_len: int, out_len: int) -> None:
    def thr(c: int, knob: int) -> float:
        return steady_throughput(P, c, knob, in_len, out_len)

    assert thr(96, 256) < thr(80, 256) * 0.99  # the anomaly, with a margin a bench can see
    assert thr(96, 512) >= thr(80, 512) * 1.01  # fixed by the knob


def test_wave_quantization() -> None:
    assert wave_efficiency(P, 188) == pytest.approx(1.0)
    assert wave_efficiency(P, 189) == pytest.approx(189 / 376)
    # C96 at 256 CTAs: 192 tiles x 2 splits = 384 CTAs = 2.04 waves -> a third, nearly empty wave.
    assert ctas(P, 96, 256) == 384
    assert ctas(P, 80, 256) == ctas(P, 80, 512) / 2


def test_step_time_grows_with_batch_and_context() -> None:
    assert decode_step_s(P, 0, 0, 256) == 0.0
    assert decode_step_s(P, 16, 1000, 256) < decode_step_s(P, 64, 1000, 256)
    assert decode_step_s(P, 64, 1000, 256) < decode_step_s(P, 64, 100_000, 256)
    assert 0.02 < decode_step_s(P, 64, 64 * 160, 256) < 0.06  # a realistic DeepSeek PCIe ITL


def test_prefill_and_transfer() -> None:
    assert prefill_s(P, 0) == pytest.approx(P.prefill_a_s)
    assert prefill_s(P, 2000) > 2 * (prefill_s(P, 1000) - P.prefill_a_s)  # quadratic term
    assert kv_transfer_s(P, 0) == pytest.approx(P.transfer_setup_s)
    assert kv_transfer_s(P, 1000) == pytest.approx(
        P.transfer_setup_s + 1000 * P.kv_bytes_per_token / P.link_bw_bytes_s
    )


def test_another_profile_changes_the_answer() -> None:
    big = HardwareProfile(sm_count=400)
    assert steady_throughput(big, 96, 256, 128, 64) != steady_throughput(P, 96, 256, 128, 64)
    assert steady_throughput(P, 0, 256, 128, 64) == 0.0
