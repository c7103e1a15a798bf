"""The kept lists of the variables each engine release reads (core/knobs/engineenv.py) against
their fixture (engine_env.toml, read from the engines' source)."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

import pytest

from servelab.core.knobs.engineenv import env_list
from servelab.sim.envreads import SIM_READS, vllm_warnings
from servelab.sim.serverinfo import SGLANG_SIM_VERSION, VLLM_SIM_VERSION

HERE = Path(__file__).parent
VERSIONS = {"vllm": VLLM_SIM_VERSION, "sglang": SGLANG_SIM_VERSION}


def _fixture(engine: str) -> dict[str, Any]:
    with (HERE / "engine_env.toml").open("rb") as f:
        return dict(tomllib.load(f)[engine])


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_kept_list_is_the_fixtures(engine: str) -> None:
    fixture = _fixture(engine)
    kept = env_list(engine, fixture["release"])
    assert kept is not None and kept.version == fixture["release"]
    assert fixture["file"] in kept.source and fixture["read_at"].split()[1] in kept.source
    assert list(kept.prefixes) == fixture["prefixes"]
    assert len(kept.names) == fixture["count"]
    digest = hashlib.sha256("\n".join(sorted(kept.names)).encode()).hexdigest()[:16]
    assert digest == fixture["sha256_16"]
    assert all(kept.reads(name) for name in fixture["read"])
    assert not any(kept.reads(name) for name in fixture["not_read"])
    assert all(kept.judges(name) for name in kept.names)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_simulator_reports_a_release_with_a_list(engine: str) -> None:
    assert env_list(engine, VERSIONS[engine]) is not None  # "+sim" is the build, not the release


def test_the_simulated_vllm_warns_as_vllm_does() -> None:
    env = {"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_SERVER_DEV_MODE": "1", "HOME": "/",
           "VLLM_SM120_MMA_TARGET_CTAS": "512"}  # fmt: skip
    assert vllm_warnings(env, VLLM_SIM_VERSION) == [
        "Unknown vLLM environment variable detected: VLLM_ATTENTION_BACKEND"
    ]
    assert "VLLM_SM120_MMA_TARGET_CTAS" in SIM_READS  # what the simulator's model reads
