"""``servelab case bisect`` through the CLI on a real stack: the guilty change among six recorded
ones, and two changes guilty only together.

The stack: simulated prefill and decode behind the real sglang-router, the decode's arguments in
its env file (``args_env``). The test is the case's failing soak replayed: 12 agentic sessions of 4
rounds, a session failing when it gets no byte for 1 s.

1. Six changes recorded since a verification, one guilty: ``SGLANG_SM120_MLA_KV_TILE=16`` (the
   simulator's long-context fault: prompts over 1024 tokens never get a token out of decode; the
   sessions grow past that in their fourth round). ddmin finds it in fewer probes than six, every
   probe is evidence on the case, and ``case resolve`` takes the verdicts.
2. Three listed changes, two guilty only together: ``--max-running-requests=1`` (one request
   decodes at a time) and a decode ten times slower (the simulator's time scale 0.1 → 1.0). Either
   alone keeps every gap under 1 s (0/12 sessions fail); together a request waits seconds in the
   queue (10/12 fail). Found as the pair; interrupted after its second probe and resumed, the
   probes done are kept.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from servelab.core.case.bisect import Change
from servelab.core.case.bisectevents import ProbeStarted
from servelab.core.case.probe import parse_probe_test
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.progress import ProgressEvent
from servelab.core.soak.result import SoakConfig
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.case.bisect import BisectConfig, run_bisect
from servelab.ops.case.experiment import soak_targets
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.knob import get_knob, live_knobs, set_knob
from servelab.ops.soak.soak import soak
from servelab.ops.verify.verify import verify
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

TILE = "SGLANG_SM120_MLA_KV_TILE"
SCALE = "SERVELAB_SIM_TIME_SCALE"
CAP = "--max-running-requests"
HARMLESS_ENV = ("SGLANG_ENABLE_JIT_DEEPGEMM", "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT")
KNOBS = (
    DEFAULT_KNOB,
    TILE,
    *HARMLESS_ENV,
    SCALE,
    CAP,
    "--enable-cache-report",
    "--schedule-policy",
)
WORKLOAD = SoakConfig(sessions=12, rounds=4, turn_words=300, idle_timeout_s=1.0, duration_s=60,
                      localize=False, check_determinism=False)  # fmt: skip
#: Case 1's six changes, in the spec's order of the knobs; the second is guilty.
SIX = ((DEFAULT_KNOB, "256"), (TILE, "16"), (HARMLESS_ENV[0], "1"), (HARMLESS_ENV[1], "600"),
       ("--enable-cache-report", "on"), ("--schedule-policy", "lpm"))  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("bisect")
    spec = write_pd_spec(
        root, time_scale=0.1, name="bisect", knobs=KNOBS, decode_env="SGLANG_ARGS=\n",
        worker_env="SERVELAB_SIM_WARMUP_S=0\n", decode_toml='args_env = "SGLANG_ARGS"\n',
    )  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _json(*args: str, code: int = 0) -> Any:
    done = run_cli(*args, "--json", timeout=900)
    assert done.returncode == code, done.stderr + done.stdout
    return json.loads(done.stdout)


async def _failing_case(stack: LoadedSpec, ledger: Ledger, title: str, values: Any) -> int:
    """Set ``values`` (recorded), co-restart, and record the soak that fails under a new case.
    The restart is not verified: its e2e layer's long prompt would wait out its 120 s timeout on
    the guilty tile (the soak is what fails here)."""
    async with Operation(stack, ledger=ledger) as op:
        for name, value in values:
            await set_knob(op, "decode", name, value, reason="tuning")
        await deploy.restart(op, ["decode"], verify_after=False)
        cid = cases.open_case(ledger, title)
        config = replace(WORKLOAD, knobs=await live_knobs(op))
        failing = await soak(config, soak_targets(op), ledger=ledger, case_id=cid)
    assert not failing.ok
    return cid


def _changes(doc: Any) -> list[str]:
    return [c["knob"] for c in doc["start"]["changes"]]


@pytest.mark.timeout(900)
def test_the_guilty_change_among_six_recorded_ones(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        good = asyncio.run(verify(stack, ledger=ledger)).verification_id
        cid = asyncio.run(_failing_case(stack, ledger, "sessions hang after the tuning", SIX))
    led, spec, case = ("--ledger", str(ledger_file)), ("-f", stack.source), str(cid)
    started = time.monotonic()
    doc = _json("case", "bisect", case, "--good", f"verify:{good}", "--test", "soak", *spec, *led)
    wall = time.monotonic() - started
    result = doc["conclusion"]["result"]
    print(f"case bisect, six recorded changes: {result['probes']} probes, "
          f"{doc['conclusion']['visits']} visits, {wall:.1f} s wall\n{doc['summary']}")  # fmt: skip
    assert _changes(doc) == [name for name, _ in SIX]  # every recorded change, in the spec's order
    assert [c["knob"] for c in result["changes"]] == [TILE] and result["minimal"]
    assert result["probes"] < len(SIX) and result["undecided"] == 0
    verdicts = dict(doc["conclusion"]["verdicts"])
    assert verdicts.pop(f"knob:decode/{TILE}") == "convicted"
    assert set(verdicts.values()) == {"exonerated"} and len(verdicts) == 5
    assert asyncio.run(get_knob(stack, "decode", TILE)) == "16"  # left as found

    shown = _json("case", "show", case, *led)
    kinds = [e["kind"] for e in shown["evidence"]]
    assert kinds.count("probe") == result["probes"] and kinds.count("bisect") == 1
    refused = run_cli("case", "resolve", case, "--root-cause", "the proxy", "--exonerate",
                      f"knob:decode/{TILE}", *led)  # fmt: skip
    assert refused.returncode == 2 and f"contradicted by evidence #{doc['evidence_id']}" in (
        refused.stderr
    )
    exonerate = [a for t in verdicts for a in ("--exonerate", t)]
    resolved = _json("case", "resolve", case, "--root-cause", "the pinned MLA KV tile",
                     "--convict", f"knob:decode/{TILE}", *exonerate, *led)  # fmt: skip
    assert resolved["status"] == "resolved"


class _Stop(Exception):
    """Raised by the progress callback to interrupt the bisection after two probes."""


def _stop_after_two(event: ProgressEvent) -> None:
    if isinstance(event, ProbeStarted) and event.number == 3:
        raise _Stop


@pytest.mark.timeout(900)
def test_a_pair_guilty_only_together_is_found_as_the_pair(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    pair = ((TILE, None), (HARMLESS_ENV[0], None), (CAP, "1"), (SCALE, "1.0"))
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_failing_case(stack, ledger, "sessions hang after two changes", pair))
        listed = (("decode", HARMLESS_ENV[0], "1", None), ("decode", CAP, None, "1"),
                  ("decode", SCALE, "0.1", "1.0"))  # fmt: skip
        cfg = BisectConfig(cid, parse_probe_test("soak"), changes=tuple(Change(*c) for c in listed))
        with pytest.raises(_Stop):
            asyncio.run(run_bisect(stack, ledger, cfg, progress=_stop_after_two))
    assert asyncio.run(get_knob(stack, "decode", CAP)) == "1"  # left as found when interrupted
    led, spec, case = ("--ledger", str(ledger_file)), ("-f", stack.source), str(cid)
    started = time.monotonic()
    doc = _json("case", "bisect", case, "--resume", *spec, *led)
    wall = time.monotonic() - started
    result = doc["conclusion"]["result"]
    print(f"case bisect, a pair among three: {result['probes']} probes ({len(doc['probes'])} "
          f"after the resume), {wall:.1f} s wall\n{doc['summary']}")  # fmt: skip
    assert [c["knob"] for c in result["changes"]] == [CAP, SCALE] and result["minimal"]
    assert [p["number"] for p in doc["probes"]] == list(range(1, result["probes"] + 1))
    assert [p["outcome"] for p in doc["probes"][:2]] == ["good", "good"]  # kept from before
    assert dict(doc["conclusion"]["verdicts"]) == {
        f"knob:decode/{HARMLESS_ENV[0]}": "exonerated", f"knob:decode/{CAP}": "convicted",
        f"knob:decode/{SCALE}": "convicted"}  # fmt: skip
