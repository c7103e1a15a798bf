"""``servelab soak`` as a real process against the real stack; results land in a real ledger."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.case.record import CaseEvidence, CaseRecord
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from tests.support import REPO, run_cli
from tests.support.http import metric, set_faults
from tests.support.specs import ROUTER_KINDS, PdPorts, pd_spec_toml
from tests.support.stack import SimStack, sim_stack

#: The decode's count of generation requests received (incremented as each one arrives).
REQUESTS = "sglang:num_requests_total"
#: A soak's answer probes in each phase (at C1, then under load), by default.
ANSWER_PROBES = SoakConfig.answer_probes


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, proxy=True) as st:
        yield st


@pytest.fixture(scope="module")
def smg_stack() -> Iterator[SimStack]:
    """The same stack behind smg 1.13 (started by the one test that soaks through it)."""
    with sim_stack(time_scale=0.05, proxy=True, router_kind="smg") as st:
        yield st


def _spec(st: SimStack, directory: Path) -> Path:
    """A spec naming the running stack (no env files, no knobs): the proxy is its entry point."""
    kind = None if st.router_kind == "sglang-router" else st.router_kind
    text = pd_spec_toml(PdPorts.of(st), name="soak-test", env_dir=None, knobs=(), proxy_args=[],
                        router_kind=kind)  # fmt: skip
    path = directory / "servelab.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _soak(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_cli("soak", "--sessions", "2", "--rounds", "4", *args, timeout=timeout)


def _stalled_soak(stack: SimStack, *args: str) -> subprocess.CompletedProcess[str]:
    """A soak through the proxy while it stalls each connection after its first request."""
    assert stack.proxy_url is not None
    set_faults(stack.proxy_url, stall_reused_after=1)
    try:
        return _soak(
            "--url",
            stack.proxy_url,
            "--router-url",
            stack.router_url,
            "--idle-timeout",
            "2",
            "--duration",
            "30",
            *args,
        )
    finally:
        set_faults(stack.proxy_url, stall_reused_after=None)


@pytest.mark.parametrize("kind", ROUTER_KINDS)
def test_clean_soak_through_the_spec_exits_0_and_is_recorded(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack: SimStack = request.getfixturevalue("smg_stack" if kind == "smg" else "stack")
    spec = _spec(stack, tmp_path)
    proc = _soak("-f", str(spec), "--idle-timeout", "5", "--duration", "30", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] is True and doc["findings"] == [] and doc["stalls"] == []
    assert doc["targets"]["entry_url"] == stack.proxy_url  # the proxy is the entry point
    assert doc["targets"]["router_url"] == stack.router_url
    # the spec names the router's metrics port and each prefill's bootstrap port
    assert doc["targets"]["metrics_url"] == f"http://127.0.0.1:{stack.prometheus_port}"
    assert {w["bootstrap_port"] for w in doc["targets"]["workers"]} == {stack.bootstrap_port, None}
    assert doc["sessions"]["completed"] == 2
    with Ledger.open(tmp_path / "state" / "ledger.db") as ledger:
        soaks = ledger.list(SoakRunRecord)
    assert len(soaks) == 1 and soaks[0].ok is True and soaks[0].result.findings == ()
    assert soaks[0].id == doc["soak_id"]
    # the default workload mixes short and long fresh context, stated and measured
    assert doc["config"]["fresh_context"] == {
        "short_words": 48,
        "long_words": 1200,
        "long_share": 0.25,
    }
    assert soaks[0].result.uncached.requests == 0  # no cache report here: unknown, not zero


def test_long_fresh_context_reaches_long_uncached_prefills_whatever_the_cache() -> None:
    with sim_stack(time_scale=0.05, decode_args=["--enable-cache-report"]) as st:
        _fresh_context_soaks(st)


def _fresh_context_soaks(stack: SimStack) -> None:
    args = ("--url", stack.router_url, "--idle-timeout", "5", "--duration", "40", "--no-record")
    proc = _soak(*args, "--fresh-context", "short:16,long:1500", "--long-share", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # every round adds 1500 new words: each warm round prefills at least that much uncached
    assert doc["uncached"]["requests"] == 8, doc["uncached"]
    assert doc["uncached"]["p90_tokens"] >= 1500 and doc["uncached"]["max_tokens"] >= 1500
    short = _soak(*args, "--fresh-context", "off", "--json")
    assert short.returncode == 0, short.stderr
    small = json.loads(short.stdout)
    assert small["config"]["fresh_context"] is None
    assert small["uncached"]["p90_tokens"] < 400, small["uncached"]  # warm rounds add little
    human = _soak(*args, "--fresh-context", "short:16,long:1500", "--long-share", "0.5")
    assert (
        "fresh context per round: short 16 or long 1500 words, long 50% of rounds" in human.stdout
    )
    assert "uncached prefill per request: max " in human.stdout
    bad = _soak(*args, "--fresh-context", "long:10")
    assert bad.returncode == 2 and "short:WORDS,long:WORDS" in bad.stderr


def test_proxy_stall_exits_1_with_a_client_proxy_finding_attached_to_a_case(
    stack: SimStack, tmp_path: Path
) -> None:
    assert stack.proxy_url is not None
    ledger_path = tmp_path / "ledger.db"
    with Ledger.open(ledger_path) as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="agent sessions hang", status="open"))
    proc = _stalled_soak(stack, "--ledger", str(ledger_path), "--case", str(case_id), "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    top = doc["findings"][0]
    assert top["layer"] == "client_proxy"
    support = {e["id"] for e in top["evidence"] if e["supports"]}
    assert {"replay.fresh_entry", "replay.direct_router"} <= support
    assert all(e["text"] for e in top["evidence"])
    assert doc["stalls"][0]["connection_requests"] == 1
    # --url/--router-url: the router's /workers gives the prefill's bootstrap port, so the
    # matrix replays the pair straight; no metrics URL was given, so its metrics are unknown
    (loc,) = doc["localizations"]
    assert loc["matrix"]["located"]["reason"] == "connection_reuse"
    assert any(c["hop"] == "pair" and c["outcome"] == "ok" for c in loc["matrix"]["cells"])
    assert loc["router_metrics"]["known"] is False and doc["targets"]["metrics_url"] is None
    unknown = [o for o in doc["observations"] if o["id"] == "router_metrics"]
    assert unknown and unknown[0]["healthy"] is None
    with Ledger.open(ledger_path) as ledger:
        soak = ledger.get(SoakRunRecord, doc["soak_id"])
        evidence = ledger.list(CaseEvidence, case_id=case_id)
    assert soak is not None and soak.result.findings[0].layer == "client_proxy"
    assert [(e.kind, e.ref_id) for e in evidence] == [("soak", doc["soak_id"])]


def test_human_output_names_the_layer(stack: SimStack, tmp_path: Path) -> None:
    assert stack.proxy_url is not None
    proc = _stalled_soak(stack, "--no-record")
    assert proc.returncode == 1
    assert "client / proxy layer" in proc.stdout
    assert "+ same payload on a fresh connection via the entry point: HTTP 200" in proc.stdout
    assert not (tmp_path / "ledger.db").exists()


def test_ctrl_c_ends_the_soak_cleanly_and_saves_the_partial_result(
    stack: SimStack, tmp_path: Path
) -> None:
    ledger_path = tmp_path / "ledger.db"
    argv = [
        sys.executable,
        "-m",
        "servelab",
        "soak",
        "--url",
        stack.router_url,
        "--sessions",
        "2",
        "--rounds",
        "1000",
        "--think-time",
        "0.2",
        "--duration",
        "60",
        "--ledger",
        str(ledger_path),
    ]
    before = metric(stack.decode_url, REQUESTS)
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        seen = ""
        deadline = time.monotonic() + 60
        while "soak:" not in seen and time.monotonic() < deadline:  # wait until it soaks
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                seen += proc.stderr.readline()
        assert "soak:" in seen, seen
        # a round is done once the decode has finished a ninth request: the 3 answer probes at
        # C1, the 3 under load and the first round of each of the 2 sessions make eight (the
        # decode counts a request once it finished); a ninth is a session's second round, sent
        # only after its first one finished (a fifth, as this said before the probes were 3,
        # was reached by the probes alone on a busy machine: "rounds_done 0")
        while metric(stack.decode_url, REQUESTS) < before + 2 * ANSWER_PROBES + 2 + 1:
            assert time.monotonic() < deadline and proc.poll() is None, "no round finished"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGINT)
        start = time.monotonic()
        _, err = proc.communicate(timeout=15)
        assert time.monotonic() - start < 10
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    with Ledger.open(ledger_path) as ledger:
        soaks = ledger.list(SoakRunRecord)
    assert len(soaks) == 1
    assert soaks[0].result.interrupted is True and soaks[0].ok is False
    assert soaks[0].result.sessions.rounds_done > 0
    with pytest.raises(ProcessLookupError):  # nothing of its process group is left
        os.killpg(proc.pid, 0)


def test_an_unknown_case_is_refused_before_soaking(stack: SimStack, tmp_path: Path) -> None:
    proc = _soak("--url", stack.router_url, "--ledger", str(tmp_path / "l.db"), "--case", "42")
    assert proc.returncode == 2
    assert "no case 42" in proc.stderr
    with Ledger.open(tmp_path / "l.db") as ledger:
        assert ledger.list(SoakRunRecord) == []
