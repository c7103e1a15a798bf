"""The prompt tokens of one instant of a replay are bounded (issue 38, fifth pass, D3): a burst's
prompts and bodies are built ahead of its instant, about 12 MB of the client a million tokens, so
80 requests of 1,040,000 tokens on one timestamp grew past 1.1 GB. A trace just over
:data:`MAX_BURST_TOKENS` is refused by a real process before any load, exit 2, naming the file and
line, with its peak memory measured small; one at the budget, or the same requests spread over
instants, passes the scan. Nothing listens at :data:`NOWHERE` (a refusal sends nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.load.trace import MAX_BURST_TOKENS, TraceWindow
from servelab.io.tracefile import scan_trace
from tests.support.peakrss import run_measured

NOWHERE = "http://127.0.0.1:9"
#: The peak memory (RSS) the refusal may reach: the interpreter and its imports, not the prompts.
MAX_RSS_MB = 400
#: Each request's prompt tokens: the budget is a whole number of them.
TOKENS = 1_000_000
AT_BUDGET = MAX_BURST_TOKENS // TOKENS


def _write(path: Path, lines: int, spread_ms: float = 0.0) -> Path:
    """``lines`` conversations of one turn of :data:`TOKENS`, ``spread_ms`` apart."""
    with path.open("w") as out:
        for k in range(lines):
            line = {"session_id": f"s{k}", "timestamp": k * spread_ms, "input_length": TOKENS,
                    "output_length": 4, "hash_ids": [k]}  # fmt: skip
            out.write(json.dumps(line) + "\n")
    return path


def test_a_burst_over_the_token_budget_is_refused_in_little_memory(tmp_path: Path) -> None:
    assert AT_BUDGET * TOKENS == MAX_BURST_TOKENS
    trace = _write(tmp_path / "big.jsonl", AT_BUDGET + 1)
    args = ["bench", "--url", NOWHERE, "--trace", str(trace), "--no-ledger", "--deadline", "15"]
    proc, rss_mb = run_measured(args, tmp_path / "rss")
    err = proc.stderr
    assert proc.returncode == 2, err
    assert (
        f"{trace} line {AT_BUDGET + 1}: the conversations starting at one instant of the replay "
        f"ask more than {MAX_BURST_TOKENS:,} prompt tokens" in err
    )
    assert "Traceback" not in err and "no answer" not in err, err  # refused before any request
    assert rss_mb < MAX_RSS_MB, f"peak RSS {rss_mb:.0f} MB"


def test_a_burst_at_the_budget_or_spread_over_instants_passes_the_scan(tmp_path: Path) -> None:
    scan = scan_trace(_write(tmp_path / "full.jsonl", AT_BUDGET), TraceWindow())
    assert (scan.requests, scan.longest_line) == (AT_BUDGET, 1)
    spread = scan_trace(_write(tmp_path / "spread.jsonl", AT_BUDGET + 1, 1.0), TraceWindow())
    assert spread.requests == AT_BUDGET + 1
