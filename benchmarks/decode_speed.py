"""The client's per-token work after the transport, measured: HTTP/1.1 parse and SSE decode.

Replays the truth server's exact bytes (``benchmarks/peers/truth_server.py``: head + role chunk,
63 token chunks, the closing chunk) through :class:`servelab.io.http.h1.ResponseParser` read by
read, then decodes every captured body with :func:`servelab.core.load.records.decode_chunks`, as
``bench`` does after a run; ``--group K`` puts K token chunks in one read (what a busy loop reads at
high concurrency). CPU µs per output token (``time.process_time``, best of 5). ``--against REV``
runs the same on the tree at git revision REV (``git archive`` into a temporary directory), side by
side.

Usage: .venv/bin/python benchmarks/decode_speed.py [--against REV] [--streams 1500]
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OSL = 64


def _reads(ts: object, group: int) -> list[bytes]:
    chunks = ts.TOKEN_CHUNKS  # type: ignore[attr-defined]
    tokens = [chunks[i % len(chunks)] for i in range(OSL - 1)]
    grouped = [b"".join(tokens[i : i + group]) for i in range(0, OSL - 1, group)]
    return [ts.HEAD_AND_ROLE, *grouped, ts._tail(128, OSL)]  # type: ignore[attr-defined]


def measure(root: Path, streams: int) -> None:
    """Print parse and decode µs/token of the tree at ``root``, for 1 and 4 chunks per read."""
    sys.path[:0] = [str(root / "benchmarks" / "peers"), str(root / "src")]
    ts = importlib.import_module("truth_server")  # the tree under test is chosen at run time
    records = importlib.import_module("servelab.core.load.records")
    response_parser = importlib.import_module("servelab.io.http.h1").ResponseParser

    for group in (1, 4):
        reads, parse_s, decode_s = _reads(ts, group), [], []
        for _ in range(5):
            start, caps = time.process_time(), []
            for _ in range(streams):
                parser, got = response_parser(), []
                for data in reads:
                    body = parser.feed(data)
                    if body:
                        got.append((1, body))
                caps.append(got)
            parse_s.append(time.process_time() - start)
            start = time.process_time()
            for i, got in enumerate(caps):
                record = records.decode_chunks(records.RequestRecord(i, 0), got, 2)
                assert record.ok and record.output_tokens == OSL
            decode_s.append(time.process_time() - start)
        per = streams * OSL / 1e6
        print(
            f"| {root.name} | {group} | {min(parse_s) / per:.2f} | {min(decode_s) / per:.2f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=None, help="a git revision to measure too")
    parser.add_argument("--streams", type=int, default=1500)
    parser.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.root:
        measure(Path(args.root), args.streams)
        return
    print("| tree | chunks per read | parse µs/token | decode µs/token |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        roots = [REPO]
        if args.against:
            old = Path(tmp) / args.against
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(REPO), "archive", args.against, "src", "benchmarks"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            roots.insert(0, old)
        for root in roots:
            cmd = [sys.executable, __file__, "--root", str(root), "--streams", str(args.streams)]
            subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
