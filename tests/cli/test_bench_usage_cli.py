"""``servelab bench`` against an engine whose ``usage`` lies (issue 38, the ninth pass): 64
content chunks then ``completion_tokens`` of -5, 10^30, 3 (fewer than the chunks), ``true`` or
1.5, or ``prompt_tokens`` of 10^30: the counts are not believed, the 64 counted events stand,
the level says how many requests disagreed (``usage_disagreed``; "usage disagreed" in the text)
and the throughput is never negative or absurd. A believable count is still taken. Real
processes: the engine is a small aiohttp app on a free loopback port."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.support import run_cli
from tests.support.servers import served

EVENTS = 64


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _engine(usage: dict[str, Any]) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for _ in range(EVENTS):
            choice = {"index": 0, "delta": {"content": "w"}, "finish_reason": None}
            await resp.write(_sse({"object": "chat.completion.chunk", "choices": [choice]}))
        await resp.write(_sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


def _bench(url: str, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "bench", "--url", url, "--requests", "3", "--concurrency", "1", "--ledger",
        str(cwd / "l.db"), *extra, cwd=cwd, unset=("SERVELAB_LEDGER",), timeout=60,
    )  # fmt: skip


async def _run(usage: dict[str, Any], cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    import asyncio

    async with served(_engine(usage)) as url:
        return await asyncio.to_thread(_bench, url, cwd, *extra)


LIES: dict[str, dict[str, Any]] = {
    "negative": {"prompt_tokens": 3, "completion_tokens": -5},
    "astronomical": {"prompt_tokens": 3, "completion_tokens": 10**30},
    "fewer-than-streamed": {"prompt_tokens": 3, "completion_tokens": 3},
    "a-bool": {"prompt_tokens": 3, "completion_tokens": True},
    "a-fraction": {"prompt_tokens": 3, "completion_tokens": 64.5},
    "prompt-astronomical": {"prompt_tokens": 10**30, "completion_tokens": 64},
}


@pytest.mark.parametrize("usage", list(LIES.values()), ids=list(LIES))
async def test_unbelievable_usage_is_not_taken(usage: dict[str, Any], tmp_path: Path) -> None:
    result = await _run(usage, tmp_path, "--json", "--export", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    level = json.loads(result.stdout)["levels"][0]
    assert (level["ok"], level["usage_disagreed"]) == (3, 3)
    assert level["output_tokens_from_usage"] is False
    mean = level["output_throughput"]["mean"]
    assert 0 < mean < 10**7, mean  # 64 tokens a request over a loopback stream
    lines = (tmp_path / "out" / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [(r["output_tokens"], r["usage_disagreed"]) for r in records] == [(EVENTS, True)] * 3
    assert all(r["input_tokens"] < 10**7 for r in records)


async def test_the_text_output_says_usage_disagreed(tmp_path: Path) -> None:
    result = await _run(LIES["negative"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert "usage disagreed" in result.stdout + result.stderr
    assert "3 request(s)" in result.stdout + result.stderr


async def test_a_believable_count_is_taken(tmp_path: Path) -> None:
    """Two tokens an event (``--stream-interval 2``): 128 believed, not flagged (the request
    asks 128: usage above its ``max_tokens`` is not believed)."""
    two_each = {"prompt_tokens": 3, "completion_tokens": 2 * EVENTS}
    result = await _run(two_each, tmp_path, "--json", "--output-len", str(2 * EVENTS))
    assert result.returncode == 0, result.stderr
    level = json.loads(result.stdout)["levels"][0]
    assert (level["usage_disagreed"], level["output_tokens_from_usage"]) == (0, True)


async def test_a_count_above_max_tokens_is_not_taken(tmp_path: Path) -> None:
    """Issue 38, the tenth pass: 1,000 completion tokens for a request of ``max_tokens`` 100
    (within 64 an event, so the event bound alone believed it): not taken; 100 is."""
    above = {"prompt_tokens": 3, "completion_tokens": 1000}
    result = await _run(above, tmp_path, "--json", "--output-len", "100")
    assert result.returncode == 0, result.stderr
    level = json.loads(result.stdout)["levels"][0]
    assert (level["ok"], level["usage_disagreed"]) == (3, 3)
    at_cap = {"prompt_tokens": 3, "completion_tokens": 100}
    result = await _run(at_cap, tmp_path, "--json", "--output-len", "100", "--no-ledger")
    level = json.loads(result.stdout)["levels"][0]
    assert (level["usage_disagreed"], level["output_tokens_from_usage"]) == (0, True)
