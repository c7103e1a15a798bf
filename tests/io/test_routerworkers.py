"""The router's worker API against the real sglang-router 0.3.2 and smg 1.13 (the 2P2D example
and its smg twin on free ports): list, remove by id, add back (202, in the background), unknown
ids, the per-router seam; smg's draining state, its 409 for a listed URL and its 400 for an id
that is not a UUID (``routers.toml``'s ``[smg] workers``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.rolling import router_kind
from servelab.errors import RouterApiError
from servelab.io.http.client import HttpClient
from servelab.io.routerworkers import (
    RouterWorker,
    SglangRouterWorkers,
    SmgRouterWorkers,
    VllmRouterWorkers,
    router_workers,
)
from servelab.io.specfile import load_spec
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from tests.support import REPO, free_ports
from tests.support.stack import start_process, stop_process, wait_http
from tests.support.xpyd import write_2p2d_spec


async def _until(
    api: SglangRouterWorkers | VllmRouterWorkers, url: str, *, listed: bool
) -> list[RouterWorker]:
    for _ in range(150):  # 15 s: smg lists a removed worker as draining for about 5 s
        workers = await api.list()
        if any(w.url == url for w in workers) == listed:
            return workers
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} still {'un' if listed else ''}listed")


async def _until_not_ready(api: SmgRouterWorkers, url: str) -> list[RouterWorker]:
    """The worker's listing once it is no longer ``ready`` (a condition, waited 15 s at most)."""
    for _ in range(150):
        listed = [w for w in await api.list() if w.url == url]
        if [w.status for w in listed] != ["ready"]:
            return listed
        await asyncio.sleep(0.1)
    raise AssertionError(f"{url} still listed ready 15 s after its removal")


WORKERS = tomllib.loads((REPO / "tests" / "contracts" / "routers.toml").read_text())["smg"]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("kind", ["sglang-router", "smg"])
def test_list_remove_and_add_a_worker_on_the_real_router(kind: str, tmp_path: Path) -> None:
    spec_path, _ports = write_2p2d_spec(tmp_path, router=kind)
    loaded = load_spec(spec_path)
    assert router_kind(loaded.spec) == kind
    decode = loaded.spec.service("decode-2").url
    prefill = loaded.spec.service("prefill-2")

    async def scenario() -> None:
        async with Operation(loaded) as op:
            assert (await deploy.up(op)).ok
            try:
                async with HttpClient() as http:
                    api = router_workers(kind, await op.url("router"), http)
                    assert isinstance(
                        api, SmgRouterWorkers if kind == "smg" else SglangRouterWorkers
                    )
                    if isinstance(api, SmgRouterWorkers):
                        await _smg_facts(api, http, decode)
                    await _exercise(api, decode, prefill.url, prefill.bootstrap_port)
            finally:
                await deploy.down(op)

    asyncio.run(scenario())


async def _smg_facts(api: SmgRouterWorkers, http: HttpClient, decode: str) -> None:
    """What smg answers that 0.3.2 did not, read raw, then through the API."""
    facts = WORKERS["workers"]
    mine = next(w for w in await api.list() if w.url == decode)
    assert mine.status == "ready"
    again = await http.probe(api.base_url + "/workers", timeout=10, method="POST",
                             json_body={"url": decode, "worker_type": "decode"})  # fmt: skip
    assert again.status == facts["add_listed"] and facts["add_listed_code"] in again.body
    assert await api.add(decode, "decode") == mine.id  # the conflict answers the listed id
    bad = await http.probe(api.base_url + "/workers/not-a-uuid", timeout=10, method="DELETE")
    assert bad.status == facts["bad_id"]
    assert await api.remove("not-a-uuid") is False
    gone = await http.probe(f"{api.base_url}/workers/{mine.id}", timeout=10, method="DELETE")
    assert gone.status == facts["remove"]
    # smg queues the removal: the listing turns from ready to draining when its job runs (under
    # a loaded machine, after the DELETE's answer), then drops the worker about 5 s later
    draining = await _until_not_ready(api, decode)
    assert [(w.status, w.healthy) for w in draining] == [(facts["listed_after_remove"], False)]
    await _until(api, decode, listed=False)
    assert await api.add(decode, "decode") is not None
    await _until(api, decode, listed=True)


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
    assert len(await _until(api, decode, listed=False)) == 3  # smg: after its draining
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
            with pytest.raises(RouterApiError, match="no worker API is known for the other router"):
                router_workers("other", "http://127.0.0.1:1", http)
            api = router_workers("sglang-router", "http://127.0.0.1:1", http)
            with pytest.raises(RouterApiError, match=r"GET http://127\.0\.0\.1:1/workers: no"):
                await api.list()

    asyncio.run(scenario())


@pytest.fixture
def vllm_router(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """The real vllm-router 0.1.17 in PD mode over one prefill and two decode simulators (the
    SGLang ones: listing and removing workers needs no traffic): its URL and the decode URLs."""
    prefill, bootstrap, d1, d2, router, metrics = free_ports(6)
    procs: list[subprocess.Popen[bytes]] = []
    env = {"SERVELAB_SIM_TIME_SCALE": "0.02"}
    try:
        for role, port, extra in (("prefill", prefill, ["--bootstrap-port", str(bootstrap)]),
                                  ("decode", d1, []), ("decode", d2, [])):  # fmt: skip
            argv = [sys.executable, "-m", "servelab", "sim", role, "--host", "127.0.0.1",
                    "--port", str(port), *extra]  # fmt: skip
            procs.append(start_process(argv, tmp_path / f"{port}.log", env))
        for port in (prefill, d1, d2):
            wait_http(f"http://127.0.0.1:{port}/health", 60)
        decodes = [f"http://127.0.0.1:{d1}", f"http://127.0.0.1:{d2}"]
        argv = [str(Path(sys.executable).parent / "vllm-router"), "--vllm-pd-disaggregation",
                "--prefill", f"http://127.0.0.1:{prefill}", "--decode", decodes[0],
                "--decode", decodes[1], "--kv-connector", "nixl", "--host", "127.0.0.1",
                "--port", str(router), "--worker-startup-check-interval", "1",
                "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics)]  # fmt: skip
        procs.append(start_process(argv, tmp_path / "router.log"))
        wait_http(f"http://127.0.0.1:{router}/readiness", 60, procs[-1])
        yield f"http://127.0.0.1:{router}", decodes
    finally:
        for proc in reversed(procs):
            stop_process(proc)


@pytest.mark.timeout(120)
def test_vllm_router_lists_and_removes_by_url_but_cannot_add(
    vllm_router: tuple[str, list[str]],
) -> None:
    base, decodes = vllm_router

    async def scenario() -> None:
        async with HttpClient() as http:
            api = router_workers("vllm-router", base, http)
            assert isinstance(api, VllmRouterWorkers) and api.can_add is False
            workers = await api.list()
            assert sorted(w.role for w in workers) == ["decode", "decode", "prefill"]
            gone = next(w for w in workers if w.url == decodes[1])
            assert gone.id == decodes[1] and gone.healthy  # no id of its own: the URL
            assert await api.remove(gone.id) is True
            assert [w.url for w in await _until(api, decodes[1], listed=False)
                    if w.role == "decode"] == [decodes[0]]  # fmt: skip
            with pytest.raises(RouterApiError, match=r"vllm-router cannot add .* back"):
                await api.add(decodes[1], "decode")

    asyncio.run(scenario())
