"""``servelab bench`` against hostile engines (issue 38, the seventh pass): an engine that sends
only ``: keepalive`` comments is idle (the idle timeout fires, the bench ends); one that streams
no token (empty chunks and a usage count, or only ``[DONE]``) or aborts did not answer (failed,
exit 1); a run's requests are bounded (``--requests`` past 100,000 refused), and a large run's
preparation stops on SIGTERM within about a second. Real processes, each engine a small aiohttp
app on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from tests.support import arun_cli, run_cli
from tests.support.servers import served, streaming_app

Handler = Callable[[web.StreamResponse], Awaitable[None]]


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return _sse({"object": "chat.completion.chunk", "model": "m", "choices": [choice]})


async def _keepalive(resp: web.StreamResponse) -> None:
    await resp.write(_chunk({"role": "assistant", "content": ""}))
    for _ in range(3000):  # 30 s at most: the client leaves long before
        await resp.write(b": keepalive\n\n")
        await asyncio.sleep(0.01)


async def _usage_only(resp: web.StreamResponse) -> None:
    await resp.write(_chunk({"role": "assistant", "content": ""}))
    for _ in range(3):
        await resp.write(_chunk({"content": ""}))
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    await resp.write(_sse({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")


async def _done_only(resp: web.StreamResponse) -> None:
    await resp.write(b"data: [DONE]\n\n")


async def _aborted(resp: web.StreamResponse) -> None:
    await resp.write(_chunk({"role": "assistant", "content": "half"}))
    await resp.write(_chunk({}, finish="abort") + b"data: [DONE]\n\n")


def _engine(handler: Handler) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await handler(resp)
        await resp.write_eof()
        return resp

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


async def _start(tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if k != "SERVELAB_LEDGER"}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "servelab", "bench", *args, "--ledger", str(tmp_path / "l.db"),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def _bench(tmp_path: Path, url: str, *args: str) -> tuple[int, str, str]:
    """``bench`` against ``url`` to its end (killed after 60 s: a hang fails, never blocks)."""
    try:
        done = await arun_cli(
            "bench", "--url", url, "--concurrency", "2", "--requests", "4", "--output-len", "4",
            "--json", *args, "--ledger", str(tmp_path / "l.db"), cwd=tmp_path,
            unset=("SERVELAB_LEDGER",), timeout=60,
        )  # fmt: skip
    except subprocess.TimeoutExpired:  # killed, as run_cli's timeout does
        pytest.fail("bench never ended")
    return done.returncode, done.stdout, done.stderr


async def test_an_engine_sending_only_comments_is_idle(tmp_path: Path) -> None:
    async with served(_engine(_keepalive)) as url:
        started = time.monotonic()
        code, out, err = await _bench(tmp_path, url, "--idle-timeout", "0.5")
    assert time.monotonic() - started < 30, "the comments held the idle timeout off"
    assert code == 1, err
    level = json.loads(out)["levels"][0]
    assert (level["ok"], level["failed"]) == (0, 4)
    assert list(level["failures"]) == ["idle timeout"]


@pytest.mark.parametrize(
    ("handler", "reason"),
    [(_usage_only, "empty answer"), (_done_only, "empty answer"), (_aborted, "aborted")],
    ids=["usage-only", "done-only", "abort"],
)
async def test_an_answer_without_a_token_or_aborted_is_a_failure(
    tmp_path: Path, handler: Handler, reason: str
) -> None:
    async with served(_engine(handler)) as url:
        code, out, err = await _bench(tmp_path, url)
    assert code == 1, err
    level = json.loads(out)["levels"][0]
    assert (level["ok"], level["failed"]) == (0, 4)
    assert list(level["failures"]) == [reason]


async def test_a_streamed_answer_stays_ok(tmp_path: Path) -> None:
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await _bench(tmp_path, url, "--idle-timeout", "0.5")
    assert code == 0, err
    level = json.loads(out)["levels"][0]
    assert (level["ok"], level["failed"]) == (4, 0)


@pytest.mark.parametrize("option", ["--requests", "--warmup"])
def test_requests_past_the_bound_are_refused(tmp_path: Path, option: str) -> None:
    for value in ("100001", "99999999999999999999999"):
        done = run_cli("bench", "--url", "http://127.0.0.1:9", option, value, cwd=tmp_path,
                       timeout=60)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "from" in done.stderr and "100,000" in done.stderr and value in done.stderr


#: A bench's interpreter, its imports and a small run stay near 60 MB (its peak, measured with
#: tests/support/peakrss.py): past this, it is building the 100,000 requests (~2.5 KB each).
BUILDING_MB = 120


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def test_a_large_run_stops_on_sigterm_while_it_is_prepared(tmp_path: Path) -> None:
    """100,000 requests take seconds to build: SIGTERM in the middle ends the bench within about
    a second (exit 143, the partial run kept), its memory bounded all along."""
    async with served(streaming_app(gap_s=0.001)) as url:
        proc = await _start(tmp_path, "--url", url, "--concurrency", "2", "--requests",
                            "100000", "--json")  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while _rss_mb(proc.pid) < BUILDING_MB:
                assert time.monotonic() < deadline and proc.returncode is None, "never built"
                await asyncio.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            out, err = await asyncio.wait_for(proc.communicate(), 30)
            took = time.monotonic() - signalled
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.communicate()
    assert proc.returncode == 143, err.decode()
    # about a second on a quiet machine; 1.87-2.18 s at load 8 on 2 cores (the bound was 1.5 s):
    # 4 s still tells a signal acted on mid-build from one left until the build's end
    assert took < 4.0, f"SIGTERM acted on after {took:.2f} s"
    assert json.loads(out)["interrupted"] is True


async def test_a_run_whose_prompts_pass_the_bound_is_refused(tmp_path: Path) -> None:
    """100,000 requests of 1,000 words would build 10⁸ words (GBs) before the run: refused."""
    async with served(streaming_app(gap_s=0.001)) as url:
        code, _out, err = await _bench(tmp_path, url, "--requests", "100000", "--input-len",
                                       "1000")  # fmt: skip
    assert code == 2, err
    assert "100,000,000 prompt words built before the run starts, over 25,000,000" in err
