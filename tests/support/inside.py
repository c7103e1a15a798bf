"""What the two ``investigate``-inside tests share (tests/cli/test_investigate_inside_cli.py and
test_investigate_wedged_cli.py, split so that each runs on its own worker): the six knobs of a
stack on time scale 0.05, the stack, the command's run, the recorded change and the case."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import set_knob
from servelab.ops.verify.verify import verify
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

__all__ = ["HARMLESS_ENV", "KNOBS", "SIX", "SOAK_ARGS", "TILE", "changed", "investigate",
           "restarts", "stack"]  # fmt: skip

TILE = "SGLANG_SM120_MLA_KV_TILE"
HARMLESS_ENV = ("SGLANG_ENABLE_JIT_DEEPGEMM", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT")
KNOBS = (DEFAULT_KNOB, TILE, *HARMLESS_ENV, "--enable-cache-report", "--schedule-policy")
#: The six changes, in the spec's order of the knobs; the second is guilty.
SIX = ((DEFAULT_KNOB, "256"), (TILE, "16"), (HARMLESS_ENV[0], "1"), (HARMLESS_ENV[1], "600"),
       ("--enable-cache-report", "on"), ("--schedule-policy", "lpm"))  # fmt: skip
SOAK_ARGS = ("--sessions", "6", "--rounds", "4", "--idle-timeout", "1.5", "--duration", "60")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    spec = write_pd_spec(
        tmp_path, time_scale=0.05, name="inside", knobs=KNOBS, decode_env="SGLANG_ARGS=\n",
        worker_env="SERVELAB_SIM_WARMUP_S=0\n",
        decode_toml='args_env = "SGLANG_ARGS"\nargs = ["--admin"]\n',
    )  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def investigate(*args: str) -> tuple[Any, str, float, int]:
    started = time.monotonic()
    done = run_cli("investigate", *args, "--yes", "--json", timeout=1100)
    wall = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr + done.stdout
    return json.loads(done.stdout), done.stderr, wall, done.returncode


def restarts(stderr: str) -> int:
    return sum(": started pid " in line for line in stderr.splitlines())  # a service started


async def changed(stack: LoadedSpec, ledger: Ledger, values: Any, title: str) -> int:
    """A passing verification, then ``values`` set (recorded) and co-restarted; a case opened."""
    assert (await verify(stack, ledger=ledger)).ok
    async with Operation(stack, ledger=ledger) as op:
        for name, value in values:
            await set_knob(op, "decode", name, value, reason="tuning")
        await deploy.restart(op, ["decode"], verify_after=False)
    return cases.open_case(ledger, title)
