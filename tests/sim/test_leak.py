"""The ``kv_leak`` fault's switch and its ghosts (pure): configured like every fault switch
(env, flag, admin JSON), validated, and seeded."""

from __future__ import annotations

import random

import pytest

from servelab.errors import SimError
from servelab.sim.faults import ENV_VARS, Faults
from servelab.sim.leak import KvLeak


def test_the_switch_reads_like_every_fault() -> None:
    assert Faults().kv_leak == 0.0
    assert Faults.from_env({ENV_VARS["kv_leak"]: "0.25"}).kv_leak == 0.25
    assert Faults().updated({"kv_leak": 1}).kv_leak == 1.0
    assert Faults().as_json()["kv_leak"] == 0.0
    for bad in ("x", -0.1, 1.5):
        with pytest.raises(SimError, match="kv_leak"):
            Faults().updated({"kv_leak": bad})


def test_ghosts_hold_their_prompts_at_the_rate_and_are_seeded() -> None:
    def run(seed: int) -> KvLeak:
        leak, rng = KvLeak(), random.Random(seed)
        for _ in range(1000):
            leak.after_handoff(0.3, rng.random(), 100)
        return leak

    leak = run(7)
    assert 240 <= leak.entries <= 360 and leak.tokens == 100 * leak.entries
    assert run(7) == leak  # the same seed leaks the same
    off = KvLeak()
    assert not off.after_handoff(0.0, 0.0, 100) and off == KvLeak()
