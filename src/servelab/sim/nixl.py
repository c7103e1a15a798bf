"""The simulated vLLM workers' NIXL KV hand-off: the prefill holds blocks, the decode pulls them.

vLLM's ``NixlConnector`` in PD mode (the flow vllm-router drives; ``docs/sim.md``):

1. the router sends the prefill leg with ``kv_transfer_params = {"do_remote_decode": true, ...}``;
   the prefill computes the prompt's KV, keeps its blocks, and answers ``kv_transfer_params``
   naming them: ``do_remote_prefill: true``, ``remote_engine_id`` (the prefill process's engine
   id), ``remote_request_id``, ``remote_block_ids``, ``remote_host`` and ``remote_port`` (its NIXL
   side channel) and ``tp_size``;
2. the router copies those params into the decode leg; the decode reads the blocks from that
   prefill (here ``POST /nixl/read`` on the side channel, then the modelled transfer time), and the
   prefill frees them once read.

A read fails, as a NIXL read of blocks the remote does not hold does, when the engine id is not
the prefill's (another process, e.g. after a restart), the request is unknown, the block ids
differ, or the blocks were freed: read once already, or not read within the abort timeout
(``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``, 480 s in vLLM, scaled like every modelled duration). The
simulated decode then fails the request (vLLM's ``kv_load_failure_policy = "fail"``).

Pure data (:class:`BlockStore`, :func:`transfer_params`) plus the side channel's aiohttp app and
the decode's client.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from servelab.sim.kvlayout import KvLayout, nixl_refusal

__all__ = [
    "BLOCK_SIZE",
    "ENV_ABORT_TIMEOUT",
    "BlockStore",
    "HeldKv",
    "KvItem",
    "NixlClient",
    "NixlError",
    "remote_prefill",
    "side_channel_app",
    "transfer_params",
]

#: Tokens per KV block (vLLM's default ``--block-size``).
BLOCK_SIZE = 16
#: Seconds a prefill keeps blocks no decode has read (modelled; vLLM's default is 480).
ENV_ABORT_TIMEOUT = "VLLM_NIXL_ABORT_REQUEST_TIMEOUT"
_MAX_HELD = 8192


@dataclass(frozen=True)
class KvItem:
    """One sequence's KV as the prefill hands it over: its first token and prompt size."""

    first_token: str
    prompt_tokens: int


@dataclass(frozen=True)
class HeldKv:
    """The blocks a prefill holds for one request, until a decode reads them or they expire."""

    engine_id: str
    request_id: str
    block_ids: tuple[int, ...]
    items: tuple[KvItem, ...]
    expires_at: float


@dataclass(frozen=True)
class NixlError:
    """Why a decode could not read its KV (the decode answers 500 with it)."""

    reason: str
    message: str


class BlockStore:
    """The prefill's held blocks, keyed by request id (bounded, oldest freed first)."""

    def __init__(self, engine_id: str, hold_s: float) -> None:
        self.engine_id = engine_id
        self.hold_s = hold_s
        self._held: OrderedDict[str, HeldKv] = OrderedDict()
        self._next_block = 0

    def _expire(self, now: float) -> None:
        for request_id in [r for r, held in self._held.items() if held.expires_at <= now]:
            del self._held[request_id]

    def hold(self, request_id: str, items: tuple[KvItem, ...], now: float) -> HeldKv:
        """Allocate blocks for ``items`` (ceil(prompt / BLOCK_SIZE) each) and hold them."""
        self._expire(now)
        count = sum(max(math.ceil(i.prompt_tokens / BLOCK_SIZE), 1) for i in items)
        blocks = tuple(range(self._next_block, self._next_block + count))
        self._next_block += count
        held = HeldKv(self.engine_id, request_id, blocks, items, now + self.hold_s)
        self._held[request_id] = held
        while len(self._held) > _MAX_HELD:
            self._held.popitem(last=False)
        return held

    def read(
        self, engine_id: str, request_id: str, block_ids: tuple[int, ...], now: float
    ) -> HeldKv | NixlError:
        """Hand over (and free) a request's blocks, or say why they are not here."""
        self._expire(now)
        if engine_id != self.engine_id:
            return NixlError("engine_id", f"remote engine id {engine_id!r} is not this engine's")
        held = self._held.get(request_id)
        if held is None:
            return NixlError("not_held", f"no KV blocks held for request {request_id!r}")
        if held.block_ids != block_ids:
            return NixlError("block_ids", f"block ids do not match request {request_id!r}")
        del self._held[request_id]
        return held

    def __len__(self) -> int:
        return len(self._held)


def transfer_params(held: HeldKv, host: str, port: int) -> dict[str, Any]:
    """The prefill answer's ``kv_transfer_params`` (vLLM NixlConnector's fields)."""
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_block_ids": list(held.block_ids),
        "remote_engine_id": held.engine_id,
        "remote_request_id": held.request_id,
        "remote_host": host,
        "remote_port": port,
        "tp_size": 1,
    }


def remote_prefill(params: object) -> bool:
    """Whether a decode leg's ``kv_transfer_params`` asks for a pull from a remote prefill."""
    return isinstance(params, Mapping) and params.get("do_remote_prefill") is True


def _read_request(body: object) -> tuple[str, str, tuple[int, ...]] | None:
    if not isinstance(body, dict):
        return None
    engine_id, request_id, blocks = (body.get(k) for k in ("engine_id", "request_id", "block_ids"))
    if not isinstance(engine_id, str) or not isinstance(request_id, str):
        return None
    if not isinstance(blocks, list) or not all(isinstance(b, int) for b in blocks):
        return None
    return engine_id, request_id, tuple(blocks)


def side_channel_app(store: BlockStore, layout: KvLayout | None = None) -> web.Application:
    """The prefill's side channel: ``GET /health`` and ``POST /nixl/read`` (its answer carries
    the prefill's KV layout, as NIXL's handshake metadata does)."""

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "engine_id": store.engine_id})

    async def read(request: web.Request) -> web.Response:
        try:
            parsed = _read_request(await request.json())
        except ValueError:
            parsed = None
        if parsed is None:
            return web.json_response({"error": "bad read request"}, status=400)
        got = store.read(*parsed, now=time.monotonic())
        if isinstance(got, NixlError):
            return web.json_response({"reason": got.reason, "error": got.message}, status=404)
        items = [{"first_token": i.first_token, "prompt_tokens": i.prompt_tokens}
                 for i in got.items]  # fmt: skip
        body: dict[str, Any] = {"request_id": got.request_id, "items": items}
        if layout is not None:
            body["kv_layout"] = layout.to_json()
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/nixl/read", read)
    return app


def _items(body: object) -> tuple[KvItem, ...] | None:
    raw = body.get("items") if isinstance(body, dict) else None
    if not isinstance(raw, list):
        return None
    return tuple(KvItem(str(i.get("first_token", "")), int(i["prompt_tokens"])) for i in raw)


class NixlClient:
    """The decode side: read a request's blocks from the prefill its params name."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the pooled connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def read(
        self, params: Mapping[str, Any], timeout_s: float, layout: KvLayout | None = None
    ) -> tuple[KvItem, ...] | NixlError:
        """The blocks' items, or why the read failed (unreachable, not held, bad params, or the
        handshake refused the prefill's layout against this decode's ``layout``)."""
        host, port = params.get("remote_host"), params.get("remote_port")
        if not isinstance(host, str) or not isinstance(port, int):
            return NixlError("params", "kv_transfer_params has no remote_host/remote_port")
        body = {
            "engine_id": params.get("remote_engine_id"),
            "request_id": params.get("remote_request_id"),
            "block_ids": params.get("remote_block_ids"),
        }
        where = f"engine {body['engine_id']} at {host}:{port}"
        try:
            async with self._client().post(
                f"http://{host}:{port}/nixl/read",
                json=body,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as resp:
                doc = await resp.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return NixlError("unreachable", f"NIXL read from {where} failed: {exc!r}")
        items = _items(doc) if resp.status == 200 else None
        if items is None:
            detail = doc.get("error") if isinstance(doc, dict) else None
            reason = doc.get("reason", "failed") if isinstance(doc, dict) else "failed"
            return NixlError(str(reason), f"NIXL read from {where} failed: {detail}")
        remote = KvLayout.read(doc.get("kv_layout")) if isinstance(doc, dict) else None
        refused = None if layout is None else nixl_refusal(layout, remote)
        if refused is not None:
            return NixlError("handshake", f"NIXL handshake with {where} failed: {refused}")
        return items
