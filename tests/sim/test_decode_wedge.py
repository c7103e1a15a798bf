"""One of two decode workers wedged, ``/health`` 200 and no ``/metrics``: through the real router.

The wedged decode is started so (``SERVELAB_SIM_WEDGE=1``, ``SERVELAB_SIM_NO_METRICS=1``); the
other one is healthy. Requests the router sends to the wedged one hang, the others are answered;
the wedged one's ``/metrics`` is 404 while its ``/health`` is 200. Switching ``wedge`` off at run
time lets the hung requests finish.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

import pytest

from tests.support import free_ports
from tests.support.http import get_json, get_status, metric, post, set_faults
from tests.support.stack import start_process, stop_process, wait_http

PY = [sys.executable, "-m", "servelab", "sim"]
BASE_ENV = {"SERVELAB_SIM_TIME_SCALE": "0.05", "SERVELAB_SIM_WARMUP_S": "0"}


@dataclass
class TwoDecodes:
    """prefill + decode ``a`` (started wedged, no metrics) + decode ``b`` + the real router."""

    ports: list[int]
    procs: list[Popen[bytes]] = field(default_factory=list)

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    @property
    def prefill(self) -> str:
        return self.url(0)

    @property
    def wedged(self) -> str:
        return self.url(2)

    @property
    def healthy(self) -> str:
        return self.url(3)

    @property
    def router(self) -> str:
        return self.url(4)


def _start(st: TwoDecodes, logs: Path) -> None:
    p, boot, a, b, router, prom = st.ports
    wedged_env = {**BASE_ENV, "SERVELAB_SIM_WEDGE": "1", "SERVELAB_SIM_NO_METRICS": "1"}
    for argv, env, log in (
        ([*PY, "prefill", "--port", str(p), "--bootstrap-port", str(boot)], BASE_ENV, "p"),
        ([*PY, "decode", "--port", str(a)], wedged_env, "a"),
        ([*PY, "decode", "--port", str(b)], BASE_ENV, "b"),
    ):
        st.procs.append(start_process([*argv, "--admin"], logs / f"{log}.log", env))
    for i, proc in zip((0, 2, 3), st.procs, strict=True):
        wait_http(st.url(i) + "/health", 30, proc)
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1"]
    argv += ["--port", str(router), "--pd-disaggregation", "--prefill", st.prefill, str(boot)]
    argv += ["--decode", st.wedged, "--decode", st.healthy, "--policy", "round_robin"]
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(prom)]
    argv += ["--worker-startup-timeout-secs", "60", "--health-check-interval-secs", "1"]
    st.procs.append(start_process(argv, logs / "router.log"))
    wait_http(st.router + "/readiness", 60, st.procs[-1])


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoDecodes]:
    st = TwoDecodes(free_ports(6))
    try:
        _start(st, tmp_path_factory.mktemp("two-decodes"))
        yield st
    finally:
        for proc in reversed(st.procs):
            stop_process(proc)


def _chat(i: int) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4}


def _try(url: str, i: int, timeout: float) -> int | None:
    try:
        return post(url + "/v1/chat/completions", _chat(i), timeout=timeout)[0]
    except TimeoutError:
        return None


def test_one_of_two_decodes_wedged_health_200_metrics_404(two: TwoDecodes) -> None:
    assert get_status(two.wedged + "/health") == 200
    assert get_status(two.wedged + "/metrics") == 404  # absent: unknown, never healthy
    assert get_status(two.healthy + "/metrics") == 200
    faults = get_json(two.wedged + "/_servelab/faults")
    assert faults["wedge"] is True and faults["no_metrics"] is True and faults["wedged"] is True
    assert _try(two.wedged, 0, 2) is None  # straight to the wedged decode: hangs
    assert _try(two.healthy, 1, 10) == 200
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda i: _try(two.router, i, 4), range(6)))
    assert results.count(None) >= 1 and results.count(200) >= 1, results
    assert metric(two.healthy, "sglang:num_requests_total") >= 2


def test_unwedging_at_run_time_lets_hung_requests_finish(two: TwoDecodes) -> None:
    with ThreadPoolExecutor(1) as pool:
        hung = pool.submit(_try, two.wedged, 10, 20)
        assert _try(two.healthy, 11, 10) == 200
        set_faults(two.wedged, wedge=False, no_metrics=False)
        assert hung.result() == 200
    assert get_status(two.wedged + "/metrics") == 200
    status, body = post(two.wedged + "/_servelab/faults", {"wedge": "sideways"})
    assert status == 400 and "wedge" in json.loads(body)["error"]["message"]
    set_faults(two.healthy, wedge=True)
    try:
        assert _try(two.healthy, 12, 2) is None
    finally:
        set_faults(two.healthy, wedge=False)
