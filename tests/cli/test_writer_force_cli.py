"""The writers' one rule (issue 38, third pass, items 5 and 6), through the real CLI: an existing
file that holds anything is overwritten only with ``--force`` (``ledger export``, ``trace
generate``, as ``init -o`` already was); ``init -o - --json`` would mix TOML and JSON on standard
output and is refused; ``trace generate`` refuses a request count past its bound and a block size
that would leave every request out (it wrote an empty trace, exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.load.tracegen import MAX_GENERATED_HASH_IDS, MAX_GENERATED_REQUESTS
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.tmpfs import tmpfs

KEPT = b"an earlier file the user keeps\n"


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    with Ledger.open(path):
        pass
    return path


def _one_line(stderr: str) -> None:
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_ledger_export_keeps_an_existing_file_without_force(
    tmp_path: Path, ledger: Path, fmt: str
) -> None:
    out = tmp_path / ("folder" if fmt == "csv" else f"out.{fmt}")
    kept = out / "manifest.json" if fmt == "csv" else out
    kept.parent.mkdir(exist_ok=True)
    kept.write_bytes(KEPT)
    args = ("ledger", "export", "--format", fmt, str(out), "--ledger", str(ledger))
    refused = run_cli(*args)
    assert refused.returncode == 2, refused.stderr
    assert f"{kept} exists: give --force to overwrite it" in refused.stderr
    _one_line(refused.stderr)
    assert kept.read_bytes() == KEPT
    done = run_cli(*args, "--force")
    assert done.returncode == 0, done.stderr
    assert kept.read_bytes() != KEPT


def test_trace_generate_keeps_an_existing_file_without_force(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    out.write_bytes(KEPT)
    refused = run_cli("trace", "generate", str(out), "--sessions", "2")
    assert refused.returncode == 2, refused.stderr
    assert f"{out} exists: give --force to overwrite it" in refused.stderr
    _one_line(refused.stderr)
    assert out.read_bytes() == KEPT
    done = run_cli("trace", "generate", str(out), "--sessions", "2", "--force")
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().count(b"\n") > 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--kind", "chat", "--requests", str(10**8)),
         f"--requests 100,000,000: a generated trace holds at most {MAX_GENERATED_REQUESTS:,}"),
        (("--sessions", str(10**6)), "--sessions 1,000,000 of up to 8 turns: a generated trace"),
        (("--block-size", "65536"), "--block-size 65,536: the 4 shared block(s) alone"),
        (("--kind", "chat", "--block-size", "65536"), "past the 16,384-token prompt cap"),
    ],
    ids=["chat-requests", "agentic-sessions", "agentic-block", "chat-block"],
)  # fmt: skip
def test_trace_generate_refuses_what_it_cannot_write_whole(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    out = tmp_path / "t.jsonl"
    done = run_cli("trace", "generate", str(out), *args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    _one_line(done.stderr)
    assert not out.exists()


def test_init_to_standard_output_with_json_is_refused_before_anything_is_read() -> None:
    """Item 5: ``-o - --json`` put the TOML and the JSON on one standard output. Nothing listens
    at the router's URL: a command that got as far as reading it would fail otherwise (exit 1)."""
    done = run_cli("init", "--router", "http://127.0.0.1:9", "-o", "-", "--json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "-o - writes the spec on standard output, where --json writes its document" in (
        done.stderr
    )
    assert json.loads(done.stdout)["ok"] is False  # standard output: one JSON document, no TOML


@pytest.mark.parametrize(
    ("args", "requests", "tokens"),
    [(("--block-size", "1", "--sessions", "125000"), "1,000,000", "65,536"),
     (("--kind", "chat", "--block-size", "1", "--requests", "1000000"), "1,000,000", "16,384"),
     (("--block-size", "2", "--sessions", "30000", "--turns", "4", "8"), "240,000", "65,536")],
    ids=["agentic", "chat", "agentic-2"],
)  # fmt: skip
def test_trace_generate_refuses_a_trace_past_its_hash_id_cap_before_writing(
    tmp_path: Path, args: tuple[str, ...], requests: str, tokens: str
) -> None:
    """The sixteenth pass (issue 38): ``--block-size 1`` within the request cap could write
    ~28 GB (a hash id per token); refused before a byte is written, exit 2, naming
    ``--block-size`` and the cap. On a small tmpfs, so that a writer that is not bounded fills it
    (exit 1, "No space left") instead of the machine's disk."""
    with tmpfs(tmp_path / "small", "8m") as small:
        out = small / "t.jsonl"
        done = run_cli("trace", "generate", str(out), *args, timeout=60)
        assert done.returncode == 2, done.stderr
        assert f"--block-size {args[args.index('--block-size') + 1]}: " in done.stderr
        assert f"{requests} requests of up to {tokens} tokens" in done.stderr
        assert f"past the {MAX_GENERATED_HASH_IDS:,} hash ids a generated trace holds" in (
            done.stderr
        )
        _one_line(done.stderr)
        assert not out.exists()


def test_trace_generate_with_block_size_one_and_default_counts_is_written(tmp_path: Path) -> None:
    """The cap leaves the default shapes at ``--block-size 1`` alone (64 agent turns, 200 chat
    requests of a hash id per token)."""
    for kind in ("agentic", "chat"):
        out = tmp_path / f"{kind}.jsonl"
        done = run_cli("trace", "generate", str(out), "--kind", kind, "--block-size", "1")
        assert done.returncode == 0, done.stderr
        first = json.loads(out.read_bytes().splitlines()[0])
        assert len(first["hash_ids"]) == first["input_length"]
