"""The decode's one stream of rooms per bootstrap server (``GET /rooms``), against the real
bootstrap app on a loopback port: rooms published before it connects, after, and never."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

from servelab.sim.bootstrap import BootstrapClient, RoomInfo, RoomStore, bootstrap_app
from tests.support.servers import served


async def test_rooms_before_and_after_the_stream_connects_reach_their_waiters() -> None:
    store = RoomStore()
    store.publish(RoomInfo(1, "Hi", 40, cached_tokens=8))  # before the decode connects
    client = BootstrapClient()
    async with served(bootstrap_app(store)) as url:
        host, port = urlsplit(url).hostname or "", urlsplit(url).port or 0
        try:
            state: dict[str, str] = {}
            deadline = time.monotonic() + 10
            early = await client.wait_room(host, port, 1, deadline, state)
            assert early == RoomInfo(1, "Hi", 40, 8) and state["state"] == "WaitingForInput"
            waiters = [client.wait_room(host, port, r, deadline, {}) for r in (2, 3)]
            late = asyncio.gather(*waiters)
            await asyncio.sleep(0.05)
            store.publish(RoomInfo(3, "C", 30))
            store.publish(RoomInfo(2, "B", 20))
            assert [i.first_token for i in await late if i] == ["B", "C"]
            # a room that never comes: None at the deadline, still WaitingForInput
            never: dict[str, str] = {}
            t0 = time.monotonic()
            assert await client.wait_room(host, port, 9, t0 + 0.3, never) is None
            assert 0.25 < time.monotonic() - t0 < 2 and never["state"] == "WaitingForInput"
        finally:
            await client.close()


async def test_no_server_is_bootstrapping_until_the_deadline() -> None:
    client = BootstrapClient()
    try:
        state: dict[str, str] = {}
        t0 = time.monotonic()
        assert await client.wait_room("127.0.0.1", 9, 1, t0 + 0.5, state) is None
        assert 0.45 < time.monotonic() - t0 < 3 and state["state"] == "Bootstrapping"
    finally:
        await client.close()
