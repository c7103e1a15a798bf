"""The PD KV-transfer bootstrap: the prefill's room server and the decode's client.

The prefill worker runs a small HTTP server on its bootstrap port (like SGLang's
``--disaggregation-bootstrap-port``). For every request item, the prefill publishes the item's
room once its prompt is prefilled (the KV is ready, with the first token). The decode, per room,
long-polls ``GET /rooms/{room}?timeout=S`` until the room is published, then models the transfer.

Decode-side states: Bootstrapping -> WaitingForInput -> Transferring -> Success | Failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from servelab.sim.kvlayout import KvLayout

__all__ = ["BootstrapClient", "RoomInfo", "RoomStore", "bootstrap_app"]

_MAX_ROOMS = 8192


@dataclass(frozen=True)
class RoomInfo:
    """What the prefill hands over for a room: the first token, the prompt size and how much of
    the prompt its prefix cache held."""

    room: int
    first_token: str
    prompt_tokens: int
    cached_tokens: int = 0
    #: The prefill's KV layout (page size, KV dtype, model), as the hand-off carries it.
    layout: KvLayout | None = None


class RoomStore:
    """Rooms the prefill has published, and waiters for rooms not yet published (bounded)."""

    def __init__(self, layout: KvLayout | None = None) -> None:
        self.layout = layout
        self._rooms: OrderedDict[int, RoomInfo] = OrderedDict()
        self._waiters: dict[int, asyncio.Event] = {}

    def publish(self, info: RoomInfo) -> None:
        """Mark a room's KV as ready; wakes any decode waiting for it."""
        self._rooms[info.room] = info
        while len(self._rooms) > _MAX_ROOMS:
            self._rooms.popitem(last=False)
        event = self._waiters.pop(info.room, None)
        if event is not None:
            event.set()

    async def wait(self, room: int, timeout: float) -> RoomInfo | None:
        """The room's info once published, or None after ``timeout`` seconds."""
        info = self._rooms.get(room)
        if info is not None:
            return info
        event = self._waiters.setdefault(room, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
        if not event.is_set() and self._waiters.get(room) is event:
            del self._waiters[room]
        return self._rooms.get(room)


def bootstrap_app(store: RoomStore) -> web.Application:
    """The bootstrap server's app: ``GET /health`` and ``GET /rooms/{room}?timeout=S``."""

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def room(request: web.Request) -> web.Response:
        try:
            room_id = int(request.match_info["room"])
            timeout = min(max(float(request.query.get("timeout", "30")), 0.0), 3600.0)
        except ValueError:
            return web.json_response({"error": "bad room or timeout"}, status=400)
        info = await store.wait(room_id, timeout)
        if info is None:
            return web.json_response({"room": room_id, "status": "pending"}, status=404)
        body = {"room": info.room, "first_token": info.first_token}
        body.update(prompt_tokens=info.prompt_tokens, cached_tokens=info.cached_tokens)
        if store.layout is not None:
            body["kv_layout"] = store.layout.to_json()
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/rooms/{room}", room)
    return app


class BootstrapClient:
    """The decode side: find a room on a prefill's bootstrap server, within a deadline."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, force_close=False)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _poll(self, url: str, wait_s: float) -> dict[str, Any] | None:
        timeout = aiohttp.ClientTimeout(total=wait_s + 5.0)
        async with self._client().get(
            url, params={"timeout": f"{wait_s:.3f}"}, timeout=timeout
        ) as r:
            if r.status == 200:
                body = await r.json()
                return body if isinstance(body, dict) else None
            await r.read()
            return None

    async def wait_room(
        self, host: str, port: int, room: int, deadline: float, state: dict[str, str]
    ) -> RoomInfo | None:
        """Poll until the room is published or the monotonic ``deadline`` passes.

        ``state["state"]`` follows Bootstrapping -> WaitingForInput as the poll proceeds.
        """
        url = f"http://{host}:{port}/rooms/{room}"
        while (left := deadline - time.monotonic()) > 0:
            try:
                body = await self._poll(url, min(left, 30.0))
            except (aiohttp.ClientError, TimeoutError, ValueError):
                state["state"] = "Bootstrapping"
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            state["state"] = "WaitingForInput"
            if body is not None:
                first, prompt = str(body.get("first_token", "")), int(body["prompt_tokens"])
                cached, layout = int(body.get("cached_tokens", 0)), body.get("kv_layout")
                return RoomInfo(room, first, prompt, cached, KvLayout.read(layout))
        return None
