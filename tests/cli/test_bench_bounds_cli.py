"""Bounds before work (issue 38): lengths past the model's context (or past every context),
trace instants past their caps, replays longer than a week, arrivals no trace can hold: each is
refused with one line naming it, exit 2, before any prompt is built or any request sent. Real
processes; the context length comes from a simulated worker's ``GET /v1/models``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO, free_ports, run_cli
from tests.support.stack import start_process, stop_process, wait_http

TRACE = REPO / "examples" / "traces" / "agentic.jsonl"
#: Nothing listens here: a command that got as far as sending anything would fail otherwise.
NOWHERE = "http://127.0.0.1:9"


def _trace(tmp_path: Path, *lines: dict[str, object], bom: bool = False) -> str:
    path = tmp_path / "t.jsonl"
    text = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return str(path)


@pytest.fixture(scope="module")
def context_4096(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulated worker whose model lists a context length of 4096 tokens."""
    (port,) = free_ports(1)
    log = tmp_path_factory.mktemp("sim") / "decode.log"
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    proc = start_process([*argv, "--context-length", "4096"], log)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", 60, proc)
        yield url
    finally:
        stop_process(proc)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--input-len", "100000000"), "100000000 reaches 100,000,000 tokens, over 16,777,216"),
        (("--output-len", "normal:64:1e12"), "Invalid value for '--output-len'"),
        (("--trace", "LINES:input_length"), "line 1: input_length 1,000,000,000 is over"),
        (("--trace", "LINES:timestamp"), "line 1: timestamp 1e+308 is over"),
        (("--trace", "LINES:delay"), "line 2: delay 1e+300 is over"),
        (("--trace", "LINES:decades"), "over the 7-day cap"),
        (("--trace", str(TRACE), "--speedup", "1e-300"), "over the 7-day cap"),
    ],
    ids=["input-len", "output-len", "input_length", "timestamp", "delay", "span", "speedup"],
)
def test_past_the_caps_is_refused_with_exit_2_before_any_load(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    """Defects 7, 13 and 19 (issue 38): --input-len 100000000 hit MemoryError, a trace line of
    10^9 tokens grew bench to 18.9 GB, a timestamp of 1e308 died of OverflowError (exit 1),
    --speedup 1e-300 and a delay of 1e300 waited forever."""
    lines: dict[str, list[dict[str, object]]] = {
        "input_length": [{"timestamp": 0, "input_length": 1_000_000_000}],
        "timestamp": [{"timestamp": 1e308, "input_length": 5}],
        "delay": [{"session_id": "a", "timestamp": 0, "input_length": 5},
                  {"session_id": "a", "delay": 1e300, "input_length": 5}],
        "decades": [{"timestamp": 0, "input_length": 5}, {"timestamp": 1e12, "input_length": 5}],
    }  # fmt: skip
    args = tuple(
        _trace(tmp_path, *lines[a.split(":")[1]]) if a.startswith("LINES:") else a for a in args
    )
    done = run_cli("bench", "--url", NOWHERE, *args, "--no-ledger", cwd=tmp_path, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.lower().startswith("error")]
    assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr


def test_lengths_past_the_models_context_are_refused_by_name(
    tmp_path: Path, context_4096: str
) -> None:
    """Defect 7 (issue 38): lengths are checked against the context length the server lists
    (max_model_len), before any prompt is built: the option or the trace line, and the limit."""
    done = run_cli("bench", "--url", context_4096, "--input-len", "4000", "--output-len", "200",
                   "--no-ledger", cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--input-len + --output-len reach 4,200 tokens a request" in done.stderr
    assert "over the model's context length of 4,096 tokens" in done.stderr
    trace = _trace(tmp_path, {"timestamp": 0, "input_length": 16},
                   {"timestamp": 5, "input_length": 4090, "output_length": 10})  # fmt: skip
    done = run_cli("bench", "--url", context_4096, "--trace", trace, "--no-ledger",
                   cwd=tmp_path, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "line 2: 4,100 tokens (input_length + output_length), over the model's" in done.stderr


def test_a_trace_with_a_byte_order_mark_reads_fine(tmp_path: Path) -> None:
    """Defect 20 (issue 38): a trace saved with a UTF-8 BOM was "line 1: not a JSON object"
    (exit 2); now it is read whole, and only the unreachable URL stops the bench (exit 1)."""
    trace = _trace(tmp_path, {"timestamp": 0, "input_length": 16}, bom=True)
    done = run_cli("bench", "--url", NOWHERE, "--trace", trace, "--no-ledger", cwd=tmp_path,
                   timeout=60)  # fmt: skip
    assert "trace: 1 request(s) in 1 conversation(s)" in done.stderr, done.stderr
    assert "not a JSON object" not in done.stderr and done.returncode == 1


def test_trace_generate_refuses_a_rate_no_trace_can_hold(tmp_path: Path) -> None:
    """Defect 13 (issue 38): trace generate --rate 1e-300 died of "unexpected TypeError:
    Integer exceeds 64-bit range" (exit 1)."""
    out = tmp_path / "t.jsonl"
    done = run_cli("trace", "generate", str(out), "--rate", "1e-300", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--rate 1e-300: 8 arrivals at that rate span" in done.stderr
    assert not out.exists() and "Traceback" not in done.stderr
