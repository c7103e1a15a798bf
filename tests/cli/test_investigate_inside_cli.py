"""``servelab investigate`` on failures inside the serving path: a guilty knob among six recorded
changes, and a wedged decode that no recorded change explains.

1. Six changes recorded after a passing verification, one guilty:
   ``SGLANG_SM120_MLA_KV_TILE=16`` (the simulator's long-context fault: prompts over 1024 tokens
   never get a token out of decode; the soak's long fresh context reaches that). The hang is
   localized inside (no proxy), the good state (every change at its good value) passes its soak, so
   the six changes are bisected (each probe an experiment), the tile
   is convicted and left reverted (a revert under the case, verified live), the five others are
   exonerated and kept.
2. One change recorded (the decode knob 256 → 512), then the decode wedges (the simulator's
   ``wedge`` fault: /health 200, nothing decodes). The hang is localized to the decode; the knob's
   experiment co-restarts the decode, which clears the wedge, so neither arm fails: the knob is
   not convicted (inconclusive, the failure not reproduced), and the investigation ends unexplained
   (exit 1) with the layer named. It runs in two commands: ``--max-minutes`` stops it after the
   reproduction, ``--resume`` goes on from the state recorded on the case. The localizing
   verification's probe (no restart before it) fails at the soak's bound, not after 120 s.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.verify.checks import CheckCode
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import get_knob, set_knob
from servelab.ops.verify.verify import verify
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.e2ewait import e2e_waited
from tests.support.http import set_faults
from tests.support.specs import write_pd_spec

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


def _investigate(*args: str) -> tuple[Any, str, float, int]:
    started = time.monotonic()
    done = run_cli("investigate", *args, "--yes", "--json", timeout=1100)
    wall = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr + done.stdout
    return json.loads(done.stdout), done.stderr, wall, done.returncode


def _restarts(stderr: str) -> int:
    return sum(": started pid " in line for line in stderr.splitlines())  # a service started


async def _changed(stack: LoadedSpec, ledger: Ledger, values: Any, title: str) -> int:
    """A passing verification, then ``values`` set (recorded) and co-restarted; a case opened."""
    assert (await verify(stack, ledger=ledger)).ok
    async with Operation(stack, ledger=ledger) as op:
        for name, value in values:
            await set_knob(op, "decode", name, value, reason="tuning")
        await deploy.restart(op, ["decode"], verify_after=False)
    return cases.open_case(ledger, title)


@pytest.mark.timeout(1200)
def test_a_guilty_knob_among_six_is_convicted_and_left_reverted(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_changed(stack, ledger, SIX, "long agentic sessions hang"))
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    doc, stderr, wall, code = _investigate("--case", str(cid), *SOAK_ARGS, *spec, *led)
    print(f"investigate, a guilty knob among six: {wall:.1f} s wall, {_restarts(stderr)} "
          "service starts\n" + "\n".join(doc["lines"]))  # fmt: skip
    state = doc["state"]
    assert code == 0 and state["reproduced"] is True and state["side"] == "inside"
    assert [s["knob"] for s in state["suspects"]] == [name for name, _ in SIX]
    assert state["good_fails"] is False and state["good_soak_id"] is not None  # then bisected
    verdicts = {d["target"]: (d["outcome"], d["by"]) for d in state["decided"]}
    assert verdicts.pop(f"knob:decode/{TILE}") == ("convicted", "bisect")
    assert set(verdicts.values()) == {("exonerated", "bisect")} and len(verdicts) == 5
    assert state["reverted"] == [f"knob:decode/{TILE}"] and state["ending"] == "resolved"
    assert asyncio.run(get_knob(stack, "decode", TILE)) is None  # left reverted
    assert asyncio.run(get_knob(stack, "decode", HARMLESS_ENV[1])) == "600"  # the others kept
    with Ledger.open(ledger_file) as ledger:
        view = cases.view_case(ledger, cid)
    assert view.case.status == "resolved" and view.restore_status == "nothing to restore"
    # the guilty tile's long prompt never answers: failed at the localizing bound (8 x 1.5 s),
    # not after verify's 120 s
    code_, waited = e2e_waited(ledger_file, state["verification_id"])
    assert code_ is CheckCode.E2E_LONG_FAILED and waited < 60, (code_, waited)


@pytest.mark.timeout(900)
def test_a_wedged_decode_is_localized_to_the_decode_and_no_knob_is_convicted(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_changed(stack, ledger, [(DEFAULT_KNOB, "256")], "sessions hang"))
    set_faults(stack.spec.services["decode"].url, wedge=True)
    led, spec = ("--ledger", str(ledger_file)), ("-f", stack.source)
    # a budget spent by the reproduction: stopped before localizing, the state kept
    first, stderr, wall, code = _investigate("--case", str(cid), "--max-minutes", "0.0001",
                                             *SOAK_ARGS, *spec, *led)  # fmt: skip
    assert code == 1 and first["stopped"] is True and first["report"] is None
    assert first["state"]["stage"] == "localize" and first["state"]["reproduced"] is True
    assert first["next"].startswith("localize") and "--resume --case" in first["lines"][-1]
    doc, more, wall2, code = _investigate("--resume", "--case", str(cid), *SOAK_ARGS, *spec, *led)
    print(f"investigate, a wedged decode: {wall + wall2:.1f} s wall (stopped, then resumed), "
          f"{_restarts(stderr + more)} service starts\n" + "\n".join(doc["lines"]))  # fmt: skip
    assert "resumed at localize" in more
    state = doc["state"]
    assert code == 1 and state["reproduced"] is True
    assert state["layer"] in ("engine_wedge", "decode_transfer"), state
    assert state["worker"] in ("decode", None) and state["side"] == "inside"
    (decided,) = state["decided"]
    assert decided["target"] == f"knob:decode/{DEFAULT_KNOB}"
    assert decided["outcome"] != "convicted" and state["ending"] == "unexplained"
    assert state["reverted"] == [] and "no recorded change convicted" in doc["summary"]
    # no restart since the reproducing soak: the wedge swallows the localizing probe, which fails
    # at the soak's bound (8 x 1.5 s), not after verify's 120 s
    code_, waited = e2e_waited(ledger_file, state["verification_id"])
    assert code_ is CheckCode.E2E_FAILED and waited < 60, (code_, waited)
