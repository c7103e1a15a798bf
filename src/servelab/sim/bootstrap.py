"""The PD KV-transfer bootstrap: the prefill's room server and the decode's client.

The prefill worker runs a small HTTP server on its bootstrap port (like SGLang's
``--disaggregation-bootstrap-port``). For every request item, the prefill publishes the item's
room once its prompt is prefilled (the KV is ready, with the first token). The decode keeps one
connection per bootstrap server, ``GET /rooms`` (a stream of every published room, one JSON line
each: the rooms already held, then each as it is published), and its requests wait for their room
on it, as SGLang's decode waits for the prefill's status pushed over its one ZMQ channel per
prefill (no request of its own per room); then it models the transfer.
``GET /rooms/{room}?timeout=S`` still answers one room (a long poll).

Decode-side states: Bootstrapping -> WaitingForInput -> Transferring -> Success | Failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from servelab.sim.kvlayout import KvLayout

__all__ = ["BootstrapClient", "RoomInfo", "RoomStore", "bootstrap_app"]

_MAX_ROOMS = 8192
#: How soon the decode reconnects to a bootstrap server that did not answer (seconds).
_RECONNECT_S = 0.2
#: A waiting request looks again at least this often (seconds).
_RECHECK_S = 1.0


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
        self._watchers: list[asyncio.Queue[bytes]] = []

    def publish(self, info: RoomInfo) -> None:
        """Mark a room's KV as ready; wakes any decode waiting for it."""
        self._rooms[info.room] = info
        while len(self._rooms) > _MAX_ROOMS:
            self._rooms.popitem(last=False)
        event = self._waiters.pop(info.room, None)
        if event is not None:
            event.set()
        if self._watchers:
            line = room_line(info)
            for queue in self._watchers:
                queue.put_nowait(line)

    def watch(self) -> asyncio.Queue[bytes]:
        """A queue of room lines: every room held now, then each room as it is published."""
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for info in self._rooms.values():
            queue.put_nowait(room_line(info))
        self._watchers.append(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[bytes]) -> None:
        """Stop feeding ``queue`` (its connection closed)."""
        if queue in self._watchers:
            self._watchers.remove(queue)

    def close(self) -> None:
        """End every watch (an empty line ends its stream): the server is shutting down."""
        for queue in self._watchers:
            queue.put_nowait(b"")
        self._watchers = []

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


def room_line(info: RoomInfo) -> bytes:
    """A published room as one line of ``GET /rooms``'s stream."""
    body = {"room": info.room, "first_token": info.first_token}
    body.update(prompt_tokens=info.prompt_tokens, cached_tokens=info.cached_tokens)
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def _read_room(body: dict[str, Any], layout: KvLayout | None) -> RoomInfo:
    first, prompt = str(body.get("first_token", "")), int(body["prompt_tokens"])
    return RoomInfo(int(body["room"]), first, prompt, int(body.get("cached_tokens", 0)), layout)


def bootstrap_app(store: RoomStore) -> web.Application:
    """The bootstrap server's app: ``GET /health``, ``GET /rooms`` (the stream of published
    rooms, its first line the KV layout) and ``GET /rooms/{room}?timeout=S``."""

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

    async def rooms(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        layout = None if store.layout is None else store.layout.to_json()
        await resp.write(json.dumps({"kv_layout": layout}).encode() + b"\n")
        queue = store.watch()
        try:
            while line := await queue.get():
                lines = [line]
                while not queue.empty() and (line := queue.get_nowait()):
                    lines.append(line)
                await resp.write(b"".join(lines))
                if not line:
                    break
        finally:
            store.unwatch(queue)
        return resp

    async def shutdown(_app: web.Application) -> None:
        store.close()

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/rooms", rooms)
    app.on_shutdown.append(shutdown)
    app.router.add_get("/rooms/{room}", room)
    return app


class _Watch:
    """The decode's one connection to a bootstrap server: the rooms it has published (bounded),
    and the requests waiting for one (a future each, set to the room, or to None when the
    connection comes or goes: the waiter looks again)."""

    def __init__(self) -> None:
        self.connected = False
        self.rooms: OrderedDict[int, RoomInfo] = OrderedDict()
        self.waiters: dict[int, asyncio.Future[RoomInfo | None]] = {}
        self.task: asyncio.Task[None] | None = None

    def got(self, info: RoomInfo) -> None:
        self.rooms[info.room] = info
        while len(self.rooms) > _MAX_ROOMS:
            self.rooms.popitem(last=False)
        fut = self.waiters.pop(info.room, None)
        if fut is not None and not fut.done():
            fut.set_result(info)

    def wake_all(self) -> None:
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_result(None)
        self.waiters = {}


def _look_again(fut: asyncio.Future[RoomInfo | None]) -> None:
    """A waiter's time to look at its room and its deadline again."""
    if not fut.done():
        fut.set_result(None)


class BootstrapClient:
    """The decode side: find a room on a prefill's bootstrap server, within a deadline."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._watches: dict[tuple[str, int], _Watch] = {}

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=0, force_close=False)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        """Stop watching, close the connections."""
        tasks = [w.task for w in self._watches.values() if w.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watches = {}
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _watch(self, host: str, port: int) -> _Watch:
        watch = self._watches.setdefault((host, port), _Watch())
        if watch.task is None:
            watch.task = asyncio.get_running_loop().create_task(self._follow(host, port, watch))
        return watch

    async def _follow(self, host: str, port: int, watch: _Watch) -> None:
        """Keep ``watch``'s connection, reconnecting while the server does not answer."""
        url = f"http://{host}:{port}/rooms"
        while True:
            try:
                async with self._client().get(url, timeout=aiohttp.ClientTimeout()) as resp:
                    if resp.status == 200:
                        await self._stream(resp, watch)
            except (aiohttp.ClientError, OSError, ValueError, KeyError, TypeError):
                pass
            if watch.connected:
                watch.connected = False
                watch.wake_all()
            await asyncio.sleep(_RECONNECT_S)

    @staticmethod
    async def _stream(resp: aiohttp.ClientResponse, watch: _Watch) -> None:
        layout = KvLayout.read(json.loads(await resp.content.readline())["kv_layout"])
        watch.connected = True
        watch.wake_all()
        while line := await resp.content.readline():
            watch.got(_read_room(json.loads(line), layout))

    async def wait_room(
        self, host: str, port: int, room: int, deadline: float, state: dict[str, str]
    ) -> RoomInfo | None:
        """The room once published, or None when the monotonic ``deadline`` passes first.

        ``state["state"]`` is Bootstrapping until the server is connected, then WaitingForInput.
        """
        watch = self._watch(host, port)
        loop = asyncio.get_running_loop()
        try:
            while (left := deadline - time.monotonic()) > 0:
                info = watch.rooms.get(room)
                if info is not None:
                    state["state"] = "WaitingForInput"  # the server answered: past bootstrapping
                    return info
                state["state"] = "WaitingForInput" if watch.connected else "Bootstrapping"
                fut = watch.waiters.get(room)
                if fut is None or fut.done():
                    fut = watch.waiters[room] = loop.create_future()
                recheck = loop.call_later(min(left, _RECHECK_S), _look_again, fut)
                try:  # (a timer, not wait_for; shielded: items of one request share a room)
                    await asyncio.shield(fut)
                finally:
                    recheck.cancel()
            return None
        finally:
            watch.waiters.pop(room, None)
