"""``servelab investigate`` through the CLI on real stacks: the reference incident in one command.

The stack: simulated prefill and decode behind the real sglang-router, a simulated client-side
proxy in front of it (the entry point) that stops forwarding on a keep-alive connection once it
carried one request (``--stall-reused-after 1``). The story: the decode knob changed 256 → 512
(recorded, after a passing verification), then agentic sessions hang; a case is opened, the hang
soaked, the knob (the latest change) reverted on suspicion. One ``investigate --symptom hang
--yes`` then reproduces the hang, localizes it to the proxy, convicts the proxy by the differential
(through it against straight to the router), exonerates the knob by experiment (the hang with 512
and with 256 alike), resolves the case with those verdicts, restores the knob (co-restarted,
proven live by verify) and writes the incident report and the ledger's pages.
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

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.soak.result import SoakConfig
from servelab.core.verify.record import VerificationRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.case import case as cases
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from servelab.ops.investigate.steps import spec_targets
from servelab.ops.knob import get_knob, live_knobs, set_knob
from servelab.ops.soak.soak import soak
from servelab.ops.verify.verify import verify
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

KNOB = f"knob:decode/{DEFAULT_KNOB}"
WORKLOAD = SoakConfig(sessions=4, rounds=3, idle_timeout_s=2.0, duration_s=60, localize=False,
                      check_determinism=False)  # fmt: skip
SOAK_ARGS = ("--sessions", "4", "--rounds", "3", "--idle-timeout", "2", "--duration", "60")


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[LoadedSpec]:
    # no cold start (issue 34): each of the story's restarts waited 0.85 s (17 modelled) for its
    # first request, a wait nothing here is about
    spec = write_pd_spec(tmp_path, time_scale=0.05, name="incident", knob="256",
                         worker_env="SERVELAB_SIM_WARMUP_S=0\n",
                         proxy_args=["--stall-reused-after", "1"])  # fmt: skip
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def _investigate(*args: str) -> tuple[Any, str, float]:
    started = time.monotonic()
    done = run_cli("investigate", *args, "--json", timeout=900)
    wall = time.monotonic() - started
    assert done.returncode in (0, 1), done.stderr + done.stdout
    return json.loads(done.stdout), done.stderr, wall


def _restarts(stderr: str) -> int:
    return sum(": started pid " in line for line in stderr.splitlines())  # a service started


async def _incident(stack: LoadedSpec, ledger: Ledger) -> int:
    """Verified good at 256; the knob changed to 512 (recorded); the hang soaked under a new case;
    the knob reverted on suspicion."""
    good = await verify(stack, ledger=ledger)
    assert good.ok
    async with Operation(stack, ledger=ledger) as op:
        await set_knob(op, "decode", DEFAULT_KNOB, "512", reason="+12.8% at C64")
        await deploy.restart(op, ["decode"], verify_after=False)
        cid = cases.open_case(ledger, "multi-round agentic sessions hang")
        config = replace(WORKLOAD, knobs=await live_knobs(op))
        failing = await soak(config, spec_targets(op), ledger=ledger, case_id=cid)
        assert not failing.ok
        cases.add_suspect(ledger, cid, KNOB, "the latest change before the hang")
        preview = cases.revert_preview(ledger, cid, KNOB, current="512")
        assert (await cases.revert(op, ledger, preview)).ok
    return cid


@pytest.mark.timeout(900)
def test_the_incident_ends_with_the_proxy_convicted_and_the_knob_restored(
    proxied: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    with Ledger.open(ledger_file) as ledger:
        cid = asyncio.run(_incident(proxied, ledger))
    assert asyncio.run(get_knob(proxied, "decode", DEFAULT_KNOB)) == "256"  # reverted
    led, spec = ("--ledger", str(ledger_file)), ("-f", proxied.source)
    doc, stderr, wall = _investigate("--symptom", "hang", "--case", str(cid), "--yes",
                                     *SOAK_ARGS, *spec, *led)  # fmt: skip
    print(f"investigate, the incident: {wall:.1f} s wall, {_restarts(stderr)} service starts\n"
          + "\n".join(doc["lines"]))  # fmt: skip
    state = doc["state"]
    assert state["reproduced"] is True and state["layer"] == "client_proxy"
    assert state["side"] == "outside" and state["component"] == "proxy"
    assert [(s["knob"], s["good"], s["suspected"], s["reverted"]) for s in state["suspects"]] == [
        (DEFAULT_KNOB, "256", "512", True)
    ]
    verdicts = {d["target"]: (d["outcome"], d["by"]) for d in state["decided"]}
    assert verdicts == {"component:proxy": ("convicted", "case test"),
                        KNOB: ("exonerated", "case test")}  # fmt: skip
    assert state["ending"] == "resolved" and state["stage"] == "done"
    assert state["restored"] is True and doc["restore_ok"] is True
    assert asyncio.run(get_knob(proxied, "decode", DEFAULT_KNOB)) == "512"  # restored
    with Ledger.open(ledger_file) as ledger:
        view = cases.view_case(ledger, cid)
        proof = ledger.get(VerificationRecord, state["restore_verification_id"])
    assert view.case.status == "resolved" and view.restore_status == "restored and verified"
    assert {s.target: s.verdict for s in view.case.suspects} == {
        "component:proxy": "convicted", KNOB: "exonerated"}  # fmt: skip
    assert proof is not None and proof.ok
    report = Path(doc["report"]).read_text(encoding="utf-8")
    assert "component:proxy | localized | convicted" in report
    assert f"case-{cid}.md" in report and "perf-plan.md" in report
    kinds = [e["kind"] for e in _case_events(cid, led)]
    assert kinds.count("investigate") >= 5 and kinds.count("experiment") == 2
    # no A/B measured the knob it cleared and restored: said, and the line that measures it
    ab_line = f"servelab ab -f {proxied.source} --knob decode:{DEFAULT_KNOB}=256,512"
    assert any("not measured" in line and f"measure it: {ab_line}" in line for line in doc["lines"])
    assert f"measure it: {ab_line}" in report
    # each recorded state in words on the case page and in case show, not its stored JSON
    page = (Path(doc["report"]).parent / "cases" / f"case-{cid}.md").read_text(encoding="utf-8")
    assert "investigate (sessions hang): next: localize" in page and '"stage"' not in page
    shown = run_cli("case", "show", str(cid), *led)
    states = [line for line in shown.stdout.splitlines() if "investigate (sessions hang)" in line]
    assert len(states) == kinds.count("investigate") and not any("{" in s for s in states)
    assert f"{KNOB} exonerated by case test; restore plan carried out, verified live" in states[-1]


def _case_events(cid: int, led: tuple[str, ...]) -> list[Any]:
    done = run_cli("case", "show", str(cid), *led, "--json")
    assert done.returncode == 0, done.stderr
    return [e for e in json.loads(done.stdout)["timeline"] if e["kind"] != "evidence"]


@pytest.mark.parametrize(
    ("args", "words"),
    [(("--symptom", "sluggish", "--yes"), "Invalid value for '--symptom'"),
     (("--resume", "--yes"), "--resume needs --case ID"),
     (("--json",), "--json needs --yes")],
)  # fmt: skip
def test_bad_input_exits_2_before_anything_runs(
    args: tuple[str, ...], words: str, tmp_path: Path
) -> None:
    done = run_cli("investigate", *args, "--ledger", str(tmp_path / "l.db"))
    assert done.returncode == 2, done.stderr + done.stdout
    assert words in done.stderr + done.stdout
    assert not (tmp_path / "l.db").exists()


@pytest.mark.timeout(300)
def test_a_symptom_that_does_not_reproduce_ends_the_investigation_saying_so(
    tmp_path: Path,
) -> None:
    spec = write_pd_spec(tmp_path, time_scale=0.05, name="healthy")
    loaded = load_spec(spec)
    try:
        assert all(s.ok for s in asyncio.run(deploy.up(loaded)).steps)
        led = ("--ledger", str(tmp_path / "ledger.db"))
        doc, stderr, _wall = _investigate("--title", "sessions hang?", "--yes", "--sessions", "2",
                                         "--rounds", "2", "-f", str(spec), *led)  # fmt: skip
    finally:
        asyncio.run(deploy.down(loaded))
    state = doc["state"]
    assert state["reproduced"] is False and state["ending"] == "not_reproduced"
    assert state["stage"] == "done" and state["decided"] == [] and state["suspects"] == []
    assert "did not reproduce: 0 of 2 failed" in stderr
    assert doc["summary"].endswith("the symptom did not reproduce; nothing convicted")
    assert "reproduction: not reproduced (soak #" in Path(doc["report"]).read_text()
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        case = cases.load_case(ledger, state["case_id"])
    # nothing to chase: the case it opened is resolved, no verdict, saying so (no open case left)
    assert case.title == "sessions hang?" and case.status == "resolved" and not case.suspects
    assert case.root_cause == (f"did not reproduce (sessions hang): soak #{state['soak_id']} had "
                               "no failed session; nothing to chase")  # fmt: skip
