"""Issue 38, eighth pass, through the real CLI: numbers that sized memory.

``ab``/``tune --plan --max-rounds 1000000`` asked 8 GB of Pocock draws (10^20: "unexpected
ValueError"); ``bench --concurrency 100000000`` and ``case test --test answers@C10^20`` raised
MemoryError, ``--concurrency 1000000 --requests 8`` grew past 1.4 GB (a connection opened ahead
per slot); ``--trace-block-size 10^20`` died of OverflowError; ``--deadline 1e-300`` sent nothing
and passed. Each is refused (exit 2, the option named, never 30 digits echoed) or fails (exit 1).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.result import AbArm, AbResult
from servelab.core.ab.rounds import MAX_ROUNDS
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.ledger.ledger import Ledger
from tests.support import REPO, free_ports, run_cli
from tests.support.peakrss import run_measured
from tests.support.specs import write_pd_spec
from tests.support.stack import start_process, stop_process, wait_http

HUGE = "99999999999999999999"
TRACE = str(REPO / "examples" / "traces" / "agentic.jsonl")
KNOB = "decode:SGLANG_SM120_MMA_TARGET_CTAS=256,512"
#: Nothing listens here: a command that got as far as sending would fail otherwise.
NOWHERE = "http://127.0.0.1:9"
#: The peak RSS a plan at the most rounds may reach (measured 200 MB: the interpreter, numpy and
#: scipy, and 80 MB of draws; 1000 rounds asked 1.49 GiB before the bound).
PLAN_RSS_MB = 400
#: The peak RSS of an 8-request bench at C100000 (one connection opened ahead per slot grew a
#: bench at C1000000 past 1.4 GB).
BENCH_RSS_MB = 300


@pytest.mark.parametrize(
    ("args", "option", "said"),
    [
        (("ab", "--knob", KNOB, "--plan", "--max-rounds", "1000000"), "--max-rounds", "2 to 50"),
        (("ab", "--knob", KNOB, "--plan", "--max-rounds", HUGE), "--max-rounds", "2 to 50"),
        (("ab", "--max-rounds", "51"), "--max-rounds", "2 to 50"),
        (("tune", "--knob", KNOB, "--plan", "--max-rounds", "1000"), "--max-rounds", "3 to 50"),
        (("tune", "--max-rounds", "9" * 400), "--max-rounds", "(400 characters)"),
        (("bench", "--concurrency", "1000000", "--requests", "8"), "--concurrency", "100,000"),
        (("bench", "--concurrency", "8,100000000"), "--concurrency", "100,000"),
        (("bench", "--concurrency", "9" * 400), "--concurrency", "(400 characters)"),
        (("ab", "--concurrency", "100001"), "--concurrency", "100,000"),
        (("bench", "--trace", TRACE, "--trace-block-size", HUGE), "--trace-block-size", "65,536"),
        (
            ("bench", "--trace", TRACE, "--trace-block-size", "65537"),
            "--trace-block-size",
            "65,536",
        ),
        (("trace", "generate", "--block-size", HUGE, "t.jsonl"), "--block-size", "65,536"),
    ],
)
def test_a_number_that_sizes_memory_is_a_usage_error_naming_the_option(
    args: tuple[str, ...], option: str, said: str, tmp_path: Path
) -> None:
    led: tuple[str, ...] = () if args[0] == "trace" else ("--ledger", str(tmp_path / "l.db"))
    led += ("--url", NOWHERE) if args[0] == "bench" else ()
    done = run_cli(*args, *led, cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{option}'" in done.stderr and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "unexpected" not in done.stderr
    assert not re.search(r"\d{30}", done.stderr), done.stderr
    assert not (tmp_path / "l.db").exists() and not (tmp_path / "t.jsonl").exists()


@pytest.mark.parametrize("level", [HUGE, "100001", "9" * 400])
def test_a_probe_level_past_the_request_cap_is_refused(level: str, tmp_path: Path) -> None:
    target = f"decode:{DEFAULT_KNOB}"
    done = run_cli("case", "test", "1", target, "--test", f"answers@C{level}", "--ledger",
                   str(tmp_path / "l.db"), cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--test 'answers@C" in done.stderr and "C100,000" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert not re.search(r"\d{30}", done.stderr), done.stderr
    assert not (tmp_path / "l.db").exists()  # refused before the ledger was opened


@pytest.mark.parametrize("command", ["ab", "tune"])
def test_a_plan_at_the_most_rounds_stays_small(command: str, tmp_path: Path) -> None:
    """At ``--max-rounds 50`` the plan simulates Pocock's boundary over 50 looks from a running
    sum: its peak RSS stays under :data:`PLAN_RSS_MB`."""
    spec, ledger = str(write_pd_spec(tmp_path)), tmp_path / "ledger.db"
    arms = (AbArm("256", (), {64: (1000.0, 1012.0, 994.0)}),
            AbArm("512", (), {64: (1128.0, 1120.0, 1135.0)}))  # fmt: skip
    with Ledger.open(ledger) as led:
        led.record_ab(config={}, result=AbResult("decode", DEFAULT_KNOB, "256", "512", arms=arms))
    knob = f"decode:{DEFAULT_KNOB}=256,512" + (",768" if command == "tune" else "")
    args = [command, "-f", spec, "--ledger", str(ledger), "--knob", knob, "--concurrency", "64",
            "--plan", "--max-rounds", str(MAX_ROUNDS), "--json"]  # fmt: skip
    done, rss_mb = run_measured(args, tmp_path / "rss", timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ab_ids"] == [1]
    print(f"{command} --plan --max-rounds {MAX_ROUNDS}: peak RSS {rss_mb:.0f} MB")
    assert rss_mb < PLAN_RSS_MB, rss_mb


@pytest.fixture(scope="module")
def decode_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulated decode worker (it answers /v1/chat/completions itself)."""
    (port,) = free_ports(1)
    log = tmp_path_factory.mktemp("sim") / "decode.log"
    proc = start_process([sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)],
                         log)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", 60, proc)
        yield url
    finally:
        stop_process(proc)


def test_a_bench_far_wider_than_its_requests_holds_no_slot_per_level(
    decode_url: str, tmp_path: Path
) -> None:
    """C100000 with 8 requests: 8 slots started and 16 connections at most opened ahead."""
    args = ["bench", "--url", decode_url, "--concurrency", "100000", "--requests", "8",
            "--output-len", "4", "--no-ledger", "--json"]  # fmt: skip
    done, rss_mb = run_measured(args, tmp_path / "rss", timeout=120)
    assert done.returncode == 0, done.stderr
    (level,) = json.loads(done.stdout)["levels"]
    assert level["requests"] == level["ok"] == 8, level
    print(f"bench --concurrency 100000 --requests 8: peak RSS {rss_mb:.0f} MB")
    assert rss_mb < BENCH_RSS_MB, rss_mb


def test_a_bench_that_sent_nothing_before_its_deadline_fails(
    decode_url: str, tmp_path: Path
) -> None:
    done = run_cli("bench", "--url", decode_url, "--deadline", "1e-300", "--concurrency", "1",
                   "--requests", "2", "--no-ledger", cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no request was sent before the run's end (--deadline" in done.stderr, done.stderr
