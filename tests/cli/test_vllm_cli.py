"""Every command on a vLLM deployment: examples/local-vllm.toml (simulated vLLM workers behind the
real vllm-router 0.1.17) on free ports, driven through the real CLI.

``up``, ``verify`` (all four layers), ``knob diff``, ``bench``, a short ``ab`` (co-restarts decode
and the router twice), a soak with the decode's abort wedge on (localized to the decode's KV
transfer), a case with that soak as evidence, ``report`` and ``down``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from servelab.core.engines import VLLM_KNOB
from servelab.io.specfile import load_spec
from tests.support import REPO, free_ports, run_cli
from tests.support.http import set_faults
from tests.support.processes import listening

EXAMPLE = REPO / "examples" / "local-vllm.toml"


@dataclass(frozen=True)
class Deployment:
    spec: Path
    env: dict[str, str]
    ports: list[int]

    def cli(self, *args: str, timeout: float = 120) -> Any:
        done = run_cli(*args, "-f", str(self.spec), "--json", env=self.env, timeout=timeout)
        assert done.returncode in (0, 1), done.stderr
        return done.returncode, json.loads(done.stdout)


def _example(root: Path) -> tuple[Path, list[int]]:
    """The example on free ports, state and env files under ``root``, the decode with --admin."""
    text = EXAMPLE.read_text()
    ports = free_ports(5)
    for old, new in zip(("32000", "32998", "32002", "32001", "32090"), ports, strict=True):
        text = text.replace(old, str(new))
    text = re.sub(r'state_dir = ".*"', 'state_dir = "state"', text)
    text = text.replace("health_check_interval_s = 2", "health_check_interval_s = 1")
    text = text.replace(
        'env_file = "env/vllm-decode.env"\n',
        'env_file = "env/vllm-decode.env"\nargs = ["--admin"]\n',
    )
    shutil.copytree(REPO / "examples" / "env", root / "env")
    for name in ("vllm-prefill.env", "vllm-decode.env"):
        path = root / "env" / name
        path.write_text(path.read_text().replace("TIME_SCALE=0.25", "TIME_SCALE=0.02"))
    spec = root / "servelab.toml"
    spec.write_text(text)
    return spec, ports


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("vllm")
    spec, ports = _example(root)
    dep = Deployment(spec, {"SERVELAB_LEDGER": str(root / "ledger.db")}, ports)
    try:
        code, up = dep.cli("up", timeout=100)
        assert code == 0 and [s["outcome"] for s in up["steps"]] == ["ok"] * 3
        yield dep
    finally:
        down = run_cli("down", "-f", str(spec), env=dep.env)
    assert down.returncode == 0, down.stderr
    assert not any(listening(port) for port in ports)


def test_the_example_is_a_vllm_deployment() -> None:
    spec = load_spec(EXAMPLE).spec
    assert spec.engine == "vllm" and spec.service("decode").knobs == {VLLM_KNOB: None}


def test_verify_passes_all_four_layers_through_the_vllm_router(deployment: Deployment) -> None:
    code, doc = deployment.cli("verify")
    assert code == 0 and doc["ok"], doc
    layers = {c["layer"] for c in doc["checks"]}
    assert {"config", "live", "health", "e2e"} <= layers
    checks = doc["checks"]
    live = [c for c in checks if c["layer"] == "live" and c.get("knob") == VLLM_KNOB]
    assert live and live[0]["live"] == "512" and live[0]["code"] == "live.match"
    router = [c for c in checks if c["layer"] == "health" and c["service"] == "router"]
    assert router[0]["path"] == "/readiness" and router[0]["status"] == 200
    assert (router[0]["healthy_workers"], router[0]["total_workers"]) == (2, 2)
    e2e = next(c for c in checks if c["layer"] == "e2e")
    assert e2e["ok"] and e2e["completion_tokens"] > 0 and e2e["prompt_tokens"] > 500
    assert e2e["start"] == "cold" and e2e["decode_requests_before"] == [0]  # via /server_info
    long = e2e["long"]  # sized from vLLM's /v1/models max_model_len less the output tokens
    assert {x["field"] for x in long["limits"]} == {"max_model_len"} and long["status"] == 200
    assert all(x["tokens"] > 8192 for x in long["limits"]) and long["size"] == 8192
    assert long["completion_tokens"] > 0 and "skipped" not in long


def test_bench_and_knob_diff(deployment: Deployment) -> None:
    code, doc = deployment.cli(
        "bench", "--concurrency", "2", "--requests", "6", "--output-len", "8", "--input-len", "32"
    )
    assert code == 0, doc
    assert doc["failed"] == 0 and doc["levels"][0]["ok"] == 6
    assert doc["levels"][0]["output_tokens_from_usage"] is True  # usage merged by the router
    code, knob = deployment.cli("knob", "diff", "decode", VLLM_KNOB)
    assert code == 0 and knob["live"] == "512" and knob["verdict"] == "match"


@pytest.mark.timeout(240)
def test_a_short_ab_of_the_vllm_knob(deployment: Deployment) -> None:
    code, doc = deployment.cli(
        "ab", "--knob", f"decode:{VLLM_KNOB}=256,512", "--concurrency", "2", "--repeat", "1",
        "--requests", "6", "--warmup", "1", "--output-len", "8", "--input-len", "32",
        timeout=200,
    )  # fmt: skip
    assert code == 0, doc
    assert doc["knob"] == VLLM_KNOB and doc["restored"] is not None and doc["ab_id"]
    _, live = deployment.cli("knob", "diff", "decode", VLLM_KNOB)  # in the process's environment
    assert live["live"] == "512"


async def _abort_requests(url: str, n: int) -> None:
    """``n`` streamed requests cut after their first bytes, until the decode wedges."""
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4000}
    async with aiohttp.ClientSession() as http:
        for _ in range(n):
            resp = await http.post(url + "/v1/chat/completions", json={**body, "stream": True})
            await resp.content.readany()
            resp.close()
        for _ in range(50):
            async with http.get(url + "/_servelab/faults") as r:
                if (await r.json()).get("wedged"):
                    return
            await asyncio.sleep(0.05)
    raise AssertionError("the decode never wedged")


@pytest.mark.timeout(180)
def test_a_soak_with_the_abort_wedge_localizes_it_and_a_case_and_report_use_it(
    deployment: Deployment,
) -> None:
    decode = f"http://127.0.0.1:{deployment.ports[2]}"
    set_faults(decode, abort_wedge="2/30")
    try:
        asyncio.run(_abort_requests(decode, 2))
        code, soak = deployment.cli(
            "soak", "--sessions", "2", "--rounds", "3", "--idle-timeout", "2", "--duration", "25",
            timeout=60,
        )  # fmt: skip
    finally:
        set_faults(decode, abort_wedge=None)
    assert code == 1 and soak["findings"][0]["layer"] == "decode_transfer", soak["findings"]
    assert {w["role"] for w in soak["targets"]["workers"]} == {"prefill", "decode"}
    code, case = deployment.cli("case", "open", "vLLM sessions hang")
    assert code == 0
    case_id = str(case["id"])
    code, _ = deployment.cli("case", "evidence", case_id, "--soak", str(soak["soak_id"]))
    assert code == 0
    code, report = deployment.cli("report", "--out", str(deployment.spec.parent / "report"))
    assert code == 0, report
    assert (deployment.spec.parent / "report" / "cases" / f"case-{case_id}.md").exists()
