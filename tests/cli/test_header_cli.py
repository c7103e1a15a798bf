"""``--header NAME:VALUE`` reaches the proxy on every request of ``bench`` and ``soak``: a real
nginx in front of the real router refuses (403) any request without ``X-Tenant``; with the header
both commands pass through it, without it both fail there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.proxies import ProxyConfig, RunningProxy, running_proxy
from tests.support.stack import sim_stack

TENANT = ProxyConfig("nginx", "tenant", extra=('if ($http_x_tenant = "") { return 403; }',))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningProxy]:
    with sim_stack(time_scale=0.05) as st:
        workdir = tmp_path_factory.mktemp("nginx")
        with running_proxy(TENANT, workdir, st.router_url) as running:
            yield running


def test_bench_sends_the_header_on_every_request(proxy: RunningProxy, tmp_path: Path) -> None:
    common = ["bench", "--url", proxy.url, "--requests", "4", "--concurrency", "2",
              "--output-len", "4", "--no-ledger", "--json"]  # fmt: skip
    ok = run_cli(*common, "--header", "X-Tenant: a", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["failed"] == 0 and doc["config"]["headers"] == [["X-Tenant", "***"]]
    refused = run_cli(*common, cwd=tmp_path)  # its model lookup is refused first
    assert refused.returncode == 1 and "403" in refused.stderr + refused.stdout


def test_bench_worker_processes_send_the_header_too(proxy: RunningProxy, tmp_path: Path) -> None:
    ok = run_cli("bench", "--url", proxy.url, "--requests", "4", "--concurrency", "2",
                 "--workers", "2", "--output-len", "4", "--no-ledger", "--json",
                 "--header", "X-Tenant: a", cwd=tmp_path)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["config"]["workers"] == 2 and doc["failed"] == 0 and doc["levels"][0]["ok"] == 4


def test_soak_sends_the_header_on_every_request(proxy: RunningProxy, tmp_path: Path) -> None:
    common = ["soak", "--url", proxy.url, "--sessions", "2", "--rounds", "2", "--idle-timeout",
              "3", "--duration", "30", "--no-record", "--no-localize", "--json"]  # fmt: skip
    ok = run_cli(*common, "--header", "X-Tenant:a", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["config"]["headers"] == [["X-Tenant", "***"]] and doc["sessions"]["completed"] == 2
    # without the header the proxy refuses the model list too: no model, no placeholder sent
    unlisted = run_cli(*common, cwd=tmp_path)
    assert unlisted.returncode == 1 and "/v1/models" in json.loads(unlisted.stdout)["error"]
    refused = run_cli(*common, "--model", "servelab-sim", cwd=tmp_path)
    assert refused.returncode == 1
    assert {e["status"] for e in json.loads(refused.stdout)["errors"]} == {403}


def test_a_header_value_http_cannot_carry_is_refused_up_front(
    proxy: RunningProxy, tmp_path: Path
) -> None:
    """Issue 38, fifteenth pass (M1/M2): DEL failed at the model lookup as "no answer:
    ValueError: Forbidden control character" (exit 1), a '✓' as an "unexpected
    UnicodeEncodeError" (exit 1), and soak said "/v1/models lists no model" for both, on each
    of its clients. Now: exit 2 before anything is sent, the header named, its value never."""
    bench = ["bench", "--url", proxy.url, "--requests", "2", "--concurrency", "1",
             "--output-len", "4", "--no-ledger"]  # fmt: skip
    soak = ["soak", "--url", proxy.url, "--sessions", "1", "--rounds", "1", "--idle-timeout",
            "3", "--duration", "10", "--no-record", "--no-localize"]  # fmt: skip
    commands = [bench, *([*soak, "--client", c] for c in ("servelab", "naive", "openai"))]
    for bad in ("\x7f", "\u2713", "\u00e9"):
        for command in commands:
            refused = run_cli(*command, "--header", "X-Tenant: a",
                              "--header", f"Authorization: Bearer sk-PLANTED1{bad}",
                              cwd=tmp_path)  # fmt: skip
            said = refused.stdout + refused.stderr
            assert refused.returncode == 2, (command, bad, said)
            assert "header Authorization" in said and "PLANTED1" not in said, said
