"""The router's worker API against the real sglang-router 0.3.2 (the 2P2D example on free ports):
list, remove by id, add back (202, in the background), unknown ids, the per-router seam."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servelab.io.http import HttpClient
from servelab.io.routerworkers import (
    RouterApiError,
    RouterWorker,
    SglangRouterWorkers,
    router_workers,
)
from servelab.io.specfile import load_spec
from servelab.ops import deploy
from servelab.ops.context import Operation
from tests.support.xpyd import write_2p2d_spec


async def _until(api: SglangRouterWorkers, url: str, *, listed: bool) -> list[RouterWorker]:
    for _ in range(100):
        workers = await api.list()
        if any(w.url == url for w in workers) == listed:
            return workers
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} still {'un' if listed else ''}listed")


@pytest.mark.timeout(200)
def test_list_remove_and_add_a_worker_on_the_real_router(tmp_path: Path) -> None:
    spec_path, _ports = write_2p2d_spec(tmp_path)
    loaded = load_spec(spec_path)
    decode = loaded.spec.service("decode-2").url
    prefill = loaded.spec.service("prefill-2")

    async def scenario() -> None:
        async with Operation(loaded) as op:
            assert (await deploy.up(op)).ok
            try:
                async with HttpClient() as http:
                    api = router_workers("sglang", await op.url("router"), http)
                    assert isinstance(api, SglangRouterWorkers)
                    await _exercise(api, decode, prefill.url, prefill.bootstrap_port)
            finally:
                await deploy.down(op)

    asyncio.run(scenario())


async def _exercise(
    api: SglangRouterWorkers, decode: str, prefill: str, bootstrap: int | None
) -> None:
    workers = await api.list()
    assert (
        sorted((w.role, w.healthy) for w in workers)
        == [("decode", True)] * 2 + [("prefill", True)] * 2
    )
    assert {w.url: w.bootstrap_port for w in workers if w.role == "prefill"}[prefill] == bootstrap
    mine = next(w for w in workers if w.url == decode)
    assert await api.remove(mine.id) is True
    assert len(await _until(api, decode, listed=False)) == 3
    assert await api.remove(mine.id) is False  # 404: the id is gone
    new_id = await api.add(decode, "decode")
    assert new_id is not None and new_id != mine.id
    back = next(w for w in await _until(api, decode, listed=True) if w.url == decode)
    assert back.id == new_id and back.role == "decode"
    assert await api.add(decode, "decode") == new_id  # the same URL again: nothing changes
    assert len(await api.list()) == 4
    pre = next(w for w in workers if w.url == prefill)
    assert await api.remove(pre.id)
    await _until(api, prefill, listed=False)
    await api.add(prefill, "prefill", bootstrap)
    again = next(w for w in await _until(api, prefill, listed=True) if w.url == prefill)
    assert again.bootstrap_port == bootstrap and again.to_json()["role"] == "prefill"


def test_a_router_without_an_implementation_says_so() -> None:
    async def scenario() -> None:
        async with HttpClient() as http:
            with pytest.raises(RouterApiError, match="not implemented for the vllm router"):
                router_workers("vllm", "http://127.0.0.1:1", http)
            api = router_workers("sglang", "http://127.0.0.1:1", http)
            with pytest.raises(RouterApiError, match=r"GET http://127\.0\.0\.1:1/workers: no"):
                await api.list()

    asyncio.run(scenario())
