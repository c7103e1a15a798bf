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
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import free_port
from tests.support.http import get_json, get_status, metric, post, set_faults
from tests.support.pd2 import two_decode_stack
from tests.support.stack import start_process, stop_process, wait_http


@dataclass(frozen=True)
class Two:
    """The 1P2D stack's URLs: decode ``wedged`` (started so, no metrics) and ``healthy``."""

    router: str
    wedged: str
    healthy: str


@pytest.fixture(scope="module")
def two() -> Iterator[Two]:
    wedged = {"SERVELAB_SIM_WEDGE": "1", "SERVELAB_SIM_NO_METRICS": "1"}
    with two_decode_stack(decode_envs=(wedged, {})) as st:
        yield Two(st.router_url, *st.decode_urls)


def _chat(i: int) -> dict[str, object]:
    return {"model": "sim", "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 4}


def _try(url: str, i: int, timeout: float) -> int | None:
    try:
        return post(url + "/v1/chat/completions", _chat(i), timeout=timeout)[0]
    except TimeoutError:
        return None


def test_one_of_two_decodes_wedged_health_200_metrics_404(two: Two) -> None:
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


def test_unwedging_at_run_time_lets_hung_requests_finish(two: Two) -> None:
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


def test_flags_at_start_win_and_zero_is_a_value(tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port), "--admin"]
    argv += ["--wedge", "--no-metrics", "--transfer-fail-over-tokens", "0", "--fail-fast-s", "0"]
    env = {"SERVELAB_SIM_TIME_SCALE": "0.05", "SERVELAB_SIM_FAIL_FAST_S": "30"}
    proc = start_process(argv, tmp_path / "decode.log", env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/health", 30, proc)
        faults = get_json(base + "/_servelab/faults")
        assert faults["wedge"] is True and faults["no_metrics"] is True
        assert faults["transfer_fail_over_tokens"] == 0
        assert faults["fail_fast_s"] == 0.0 and faults["failing_fast"] is False  # flag beat env
    finally:
        stop_process(proc)
