"""``up`` that starts a worker behind a router already running co-restarts the router (issue 38,
H2), as ``restart decode`` does: a router keeps its worker connections and its circuit breaker,
and a decode killed under it leaves sglang-router's circuits open for 60 s ("No available
prefill workers (all circuits open or unhealthy)"), so ``up`` said "up: ok" while every request
was refused. Real processes: the simulated workers, the real sglang-router 0.3.2."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.record import DeploymentRecord
from servelab.io.ledger.ledger import Ledger
from tests.support.generic import servelab_in
from tests.support.processes import alive, listening, live_procs_under
from tests.support.specs import PdPorts, write_pd_spec

_BODY = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
).encode()


def _chat(router: str, timeout: float = 30.0) -> tuple[int, str]:
    """One chat completion through the router: its status and body."""
    request = urllib.request.Request(
        f"{router}/v1/chat/completions", _BODY, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def _pid(state: Path, service: str) -> int:
    return int(json.loads((state / "run" / f"{service}.json").read_text())["pid"])


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, PdPorts]]:
    ports = PdPorts.free(proxy=False)
    write_pd_spec(tmp_path, ports=ports)
    code, _, err = servelab_in(tmp_path, "up")
    assert code == 0, err
    try:
        yield tmp_path, ports
    finally:
        servelab_in(tmp_path, "down")
    assert live_procs_under(tmp_path) == []


def _kill_decode_and_open_circuits(root: Path, ports: PdPorts) -> None:
    """``kill -9`` the decode, then send requests through the router (bounded: 10) so its
    circuits open, as the operator's clients did."""
    pid = _pid(root / "state", "decode")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (alive(pid) or listening(ports.decode)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not listening(ports.decode)
    router = f"http://127.0.0.1:{ports.router}"
    answers = [_chat(router) for _ in range(10)]
    assert all(status != 200 for status, _ in answers), answers
    assert "circuits open" in answers[-1][1], answers[-1]  # the state the bug is about


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_up_co_restarts_the_router_a_started_decode_sits_behind(
    stack: tuple[Path, PdPorts], as_json: bool
) -> None:
    root, ports = stack
    router_pid = _pid(root / "state", "router")
    _kill_decode_and_open_circuits(root, ports)
    code, out, err = servelab_in(root, "up", *(["--json"] if as_json else []))
    assert code == 0, out + err
    status, body = _chat(f"http://127.0.0.1:{ports.router}")  # right after `up` said ok
    assert status == 200, body
    assert _pid(root / "state", "router") != router_pid
    # the step says it was a restart (never a plain "ok" start), in the report and the ledger
    if as_json:
        steps = {step["service"]: step for step in json.loads(out)["steps"]}
        assert steps["router"]["outcome"] == "ok" and steps["router"]["restarted_behind"] == [
            "decode"
        ], steps
        assert "restarted_behind" not in steps["decode"], steps
        # the outcome word the table shows, beside the kept "outcome"
        assert steps["router"]["outcome_said"] == "restarted", steps
        assert steps["decode"]["outcome_said"] == "ok", steps
    else:
        assert "up: ok" in out
        assert "router: restarting (decode was started behind it)" in err  # its progress line
        row = next(line for line in out.splitlines() if line.lstrip("│ ").startswith("router"))
        assert " restarted " in row and "decode was started behind it" in " ".join(out.split())
    with Ledger.open(root / "ledger.db") as ledger:
        row = [r for r in ledger.list(DeploymentRecord) if r.action == "up"][-1]
    stored = {step["service"]: step for step in row.detail["steps"]}
    assert stored["router"]["restarted_behind"] == ["decode"], stored
    assert "restarted_behind" not in stored["decode"], stored


def test_up_leaves_the_router_alone_when_it_started_nothing(stack: tuple[Path, PdPorts]) -> None:
    root, ports = stack
    router_pid = _pid(root / "state", "router")
    code, out, err = servelab_in(root, "up")
    assert code == 0, out + err
    assert "router: already up" in err and "restarting" not in err
    assert "restarted" not in out and "started behind it" not in out
    assert _pid(root / "state", "router") == router_pid
    assert _chat(f"http://127.0.0.1:{ports.router}")[0] == 200
