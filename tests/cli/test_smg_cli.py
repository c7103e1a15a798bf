"""The commands that send traffic, as real processes, against one deployment behind smg 1.13:
``bench -f``, ``tune`` and ``case bisect`` with a threshold test (``up``, ``verify``, ``ab``,
``soak`` and ``restart``, plain and rolling, run against both SGLang routers in their own
modules). smg routes by model: a request for a model no worker serves answers 503
``no_available_workers``, so each command must send the model the router lists; and bench keeps
the router's own telemetry, scraped on its Prometheus port."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.core.bench.record import BenchRunRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.knob import get_knob
from tests.support import run_cli
from tests.support.deployed import deployed
from tests.support.specs import write_pd_spec

CAP = "--max-running-requests"
MODEL = "servelab-sim"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    root = tmp_path_factory.mktemp("smg")
    spec = write_pd_spec(
        root, time_scale=0.05, name="smg", router_kind="smg", knobs=(CAP,),
        decode_env="SGLANG_ARGS=\n", worker_env="SERVELAB_SIM_WARMUP_S=0\n",
        decode_toml='args_env = "SGLANG_ARGS"\n',
    )  # fmt: skip
    loaded = load_spec(spec)
    assert loaded.spec.router.kind == "smg"
    with deployed(loaded):
        yield loaded


def _cli(*args: str, code: int = 0) -> Any:
    done = run_cli(*args, "--json", timeout=400)
    assert done.returncode == code, done.stderr + done.stdout
    return json.loads(done.stdout)


@pytest.mark.timeout(200)
def test_bench_through_smg_names_its_model_and_keeps_its_telemetry(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger = ("--ledger", str(tmp_path / "ledger.db"))
    doc = _cli("bench", "-f", stack.source, "--concurrency", "4", "--requests", "16",
               "--output-len", "8", "--input-len", "32", *ledger)  # fmt: skip
    assert doc["config"]["model"] == MODEL  # what the router lists, not a placeholder
    (level,) = doc["levels"]
    assert (doc["failed"], level["ok"]) == (0, 16)
    with Ledger.open(tmp_path / "ledger.db") as led:
        (run,) = led.list(BenchRunRecord)
    sources = {s["service"]: s for s in run.summary["telemetry"]["sources"]}
    router = sources["router"]  # its Prometheus port, scraped around the run
    assert router["state"] == "ok", router
    # its PD latencies (a histogram 0.3.2 did not have), and a count per worker
    assert any(name.startswith("smg_pd_ttft_seconds") for name in router["quantiles"]), router
    assert any(name.startswith("smg_worker_cb_outcomes_total") for name in router["counters"])


@pytest.mark.timeout(400)
def test_tune_through_smg_keeps_the_better_cap(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger = ("--ledger", str(tmp_path / "ledger.db"))
    doc = _cli("tune", "-f", stack.source, "--knob", f"decode:{CAP}=2,64", "--concurrency",
               "16", "--requests", "32", "--warmup", "2", "--max-rounds", "3", "--keep", "best",
               *ledger)  # fmt: skip
    print("tune through smg, tok/s at C16:",
          [(v["arm"], round(v["throughput"]["16"])) for v in doc["visits"]])  # fmt: skip
    assert doc["best"] == "64", doc
    assert all(v["failed_requests"] == 0 for v in doc["visits"])
    assert asyncio.run(get_knob(stack, "decode", CAP)) == "64"


@pytest.mark.timeout(400)
def test_case_bisect_with_a_threshold_test_through_smg(stack: LoadedSpec, tmp_path: Path) -> None:
    ledger = ("--ledger", str(tmp_path / "ledger.db"))
    case = _cli("case", "open", "throughput fell after the cap change", *ledger)
    cid = str(case["id"])
    set_cap = run_cli("knob", "set", "decode", "-f", stack.source, "--case", cid, *ledger, "--",
                      f"{CAP}=1", timeout=200)  # fmt: skip
    assert set_cap.returncode == 0, set_cap.stderr
    restarted = run_cli("restart", "decode", "-f", stack.source, *ledger, timeout=200)
    assert restarted.returncode == 0, restarted.stderr
    try:  # 4 runs an arm, one round: the good state's probe (4/4 failed against 0/4, p = 0.029)
        # must come out good before the one change is convicted (issue 38); measured, the cap at
        # 1 makes ~520 tok/s at C16 and at 64 ~6,200 at time scale 0.1; at 0.05 (issue 34) ~1,040
        # and 7,500-12,500 (the test was < 150: it never failed, and the change was convicted
        # only because nothing was probed)
        doc = _cli("case", "bisect", cid, "--change", f"decode:{CAP}=64,1", "--test",
                   "throughput@C16<2000", "--runs", "4", "--rounds", "1", "--requests", "32",
                   "--warmup", "2", "-f", stack.source, *ledger)  # fmt: skip
        result = doc["conclusion"]["result"]
        measured = [(v["arm"], v["measured"]) for p in doc["probes"] for v in p["visits"]]
        print("case bisect through smg, tok/s at C16 against < 2000:",
              [(arm, [round(x) for x in runs]) for arm, runs in measured])  # fmt: skip
        assert [c["knob"] for c in result["changes"]] == [CAP], (doc["summary"], measured)
        assert [p["outcome"] for p in doc["probes"]] == ["good"]  # the good state, measured
        assert dict(doc["conclusion"]["verdicts"])[f"knob:decode/{CAP}"] == "convicted"
    finally:
        run_cli("knob", "set", "decode", "-f", stack.source, *ledger, "--", f"{CAP}=64",
                timeout=200)  # fmt: skip
        run_cli("restart", "decode", "-f", stack.source, *ledger, timeout=200)
