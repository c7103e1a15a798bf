"""A replayed trace is bounded (issue 38, third pass, item 2): a trace of 300,000 requests on one
instant (it grew past 2 GB and ignored SIGTERM) is refused, exit 2, naming the file and line,
with the command's peak memory measured small; a window over the request cap and a line over the
byte cap alike; and SIGTERM during a replay stops it promptly, its partial run shown and saved.
Real processes; nothing listens at :data:`NOWHERE` (a refusal sends nothing)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from servelab.core.bench.record import BenchRunRecord
from servelab.core.load.trace import MAX_BURST, MAX_LINE_BYTES, MAX_WINDOW_REQUESTS
from servelab.io.ledger.ledger import Ledger
from tests.support.peakrss import run_measured
from tests.support.servers import SEEN, served, streaming_app

NOWHERE = "http://127.0.0.1:9"
#: The peak memory (RSS) the refusal may reach: the interpreter and its imports, not the trace.
MAX_RSS_MB = 400


def _write(path: Path, lines: int, spread_ms: float = 0.0) -> Path:
    """``lines`` lone requests, ``spread_ms`` apart (0: all on one instant)."""
    with path.open("w") as out:
        for k in range(lines):
            out.write(f'{{"timestamp": {k * spread_ms}, "input_length": 8, '
                      f'"output_length": 2, "hash_ids": [{k}]}}\n')  # fmt: skip
    return path


def _bench(trace: Path, *extra: str) -> tuple[int, str, float, float]:
    """``bench --trace`` as a process: its exit code, stderr, its own peak RSS (MB) and seconds."""
    started = time.monotonic()
    args = ["bench", "--url", NOWHERE, "--trace", str(trace), "--no-ledger", *extra]
    done, rss_mb = run_measured(args, trace.with_suffix(".rss"))
    return done.returncode, done.stderr, rss_mb, time.monotonic() - started


def test_300000_requests_on_one_instant_are_refused_in_little_memory(tmp_path: Path) -> None:
    trace = _write(tmp_path / "burst.jsonl", 300_000)
    code, err, rss_mb, _ = _bench(trace)
    assert code == 2, err
    assert (
        f"{trace} line {MAX_BURST + 1}: more than {MAX_BURST:,} conversations start at one "
        "instant" in err
    )
    assert "Traceback" not in err
    assert rss_mb < MAX_RSS_MB, f"peak RSS {rss_mb:.0f} MB"


def test_a_window_over_the_request_cap_is_refused(tmp_path: Path) -> None:
    trace = _write(tmp_path / "long.jsonl", MAX_WINDOW_REQUESTS + 1, spread_ms=1.0)
    code, err, rss_mb, _ = _bench(trace, "--speedup", "1000")
    assert code == 2, err
    assert (
        f"{trace} line {MAX_WINDOW_REQUESTS + 1}: the window holds more than "
        f"{MAX_WINDOW_REQUESTS:,} requests" in err
    )
    assert rss_mb < MAX_RSS_MB, f"peak RSS {rss_mb:.0f} MB"
    # the same trace, a window of it: accepted (it gets as far as sending, to nowhere)
    code, err, _, _ = _bench(trace, "--speedup", "1000", "--trace-window", "0:1")
    assert "the window holds more than" not in err and "Traceback" not in err, err


def test_a_line_over_the_byte_cap_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "wide.jsonl"
    ids = ",".join(["1"] * (MAX_LINE_BYTES // 2))
    trace.write_text('{"timestamp": 0, "input_length": 8}\n'
                     f'{{"timestamp": 1, "input_length": 8, "hash_ids": [{ids}]}}\n')  # fmt: skip
    code, err, _, _ = _bench(trace)
    assert code == 2, err
    assert f"{trace} line 2: longer than {MAX_LINE_BYTES:,} bytes" in err


async def test_sigterm_stops_a_replay_promptly_and_saves_its_partial_run(tmp_path: Path) -> None:
    burst = 200
    trace = tmp_path / "t.jsonl"
    lines = [{"timestamp": 0, "input_length": 8, "output_length": 40} for _ in range(burst)]
    lines.append({"timestamp": 3_600_000, "input_length": 8, "output_length": 4})  # in an hour
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ledger = tmp_path / "l.db"
    app = streaming_app(gap_s=0.5)
    async with served(app) as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "servelab", "bench", "--url", url, "--trace", str(trace),
            "--ledger", str(ledger), "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while app[SEEN].streams < burst // 2:  # the burst is under way
            assert time.monotonic() < deadline and proc.returncode is None, "it never streamed"
            await asyncio.sleep(0.05)
        proc.terminate()
        stopped = time.monotonic()
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        took = time.monotonic() - stopped
    assert proc.returncode == 143, err.decode()
    assert "interrupted by SIGTERM: partial results shown and saved" in err.decode()
    assert b"Traceback" not in err
    assert json.loads(out)["interrupted"] is True
    assert took < 15, f"{took:.1f} s after SIGTERM"
    with Ledger.open(ledger) as led:
        assert len(led.list(BenchRunRecord)) == 1
