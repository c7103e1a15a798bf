"""A worker that writes down what reaches it: every request's method, path, headers and JSON body,
one JSON line each, to ``LOG`` (``python -m tests.contracts.echo_worker PORT LOG [ENGINE]``).

It answers what the routers ask of a worker at start-up (``/health``, ``/v1/models`` and
``/server_info`` naming the model it serves, ``/model_info``, ``/metrics``) and a chat
completion: a prefill leg (``kv_transfer_params.do_remote_decode``) with the NIXL params a decode
needs, anything else with one streamed or whole answer. What the routers forward is then read
from the log.

It looks like the engine the router expects (``ENGINE``: ``sglang``, the default, or ``vllm``):
smg takes a worker that answers ``GET /version`` (vLLM has it, SGLang answers 404) or serves
``vllm:`` metrics for a vLLM one (no bootstrap fields, ``max_tokens: 1`` on the prefill leg; seen
here with a 200 on ``/version`` and ``sglang:`` metrics), and routes by the model its
``/v1/models`` lists."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from aiohttp import web

_CHUNK = {"id": "chatcmpl-echo", "object": "chat.completion.chunk", "created": 0, "model": "m",
          "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}  # fmt: skip
_NIXL = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": "e",
         "remote_request_id": "r", "remote_block_ids": [1], "remote_host": "127.0.0.1",
         "remote_port": 1, "tp_size": 1}  # fmt: skip


_MODEL = "servelab-sim"
_METRICS = {
    "sglang": 'sglang:num_running_reqs{model_name="servelab-sim"} 0\n',
    "vllm": 'vllm:num_requests_running{engine="0",model_name="m"} 0\n',
}


def main(port: int, log: str, engine: str = "sglang") -> None:
    def note(request: web.Request, body: Any) -> None:
        with open(log, "a", encoding="utf-8") as f:
            line = {"method": request.method, "path": request.path, "body": body,
                    "headers": dict(request.headers)}  # fmt: skip
            f.write(json.dumps(line) + "\n")

    async def get(request: web.Request) -> web.StreamResponse:
        note(request, None)
        if request.path == "/metrics":
            return web.Response(text=_METRICS[engine])
        if request.path == "/v1/models":
            return web.json_response(
                {"object": "list", "data": [{"id": _MODEL, "object": "model"}]}
            )
        if request.path in ("/server_info", "/get_server_info"):
            return web.json_response({"served_model_name": _MODEL})
        if request.path in ("/model_info", "/get_model_info"):
            return web.json_response({})
        if engine == "sglang" and request.path != "/health":
            raise web.HTTPNotFound()  # SGLang has no /version: smg tells the engines apart by it
        return web.Response(text="")

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        note(request, body)
        if body.get("stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(f"data: {json.dumps(_CHUNK)}\n\ndata: [DONE]\n\n".encode())
            await resp.write_eof()
            return resp
        out: dict[str, Any] = {
            "id": "chatcmpl-echo", "object": "chat.completion", "created": int(time.time()),
            "model": "m", "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "length"}],
        }  # fmt: skip
        params = body.get("kv_transfer_params")
        if isinstance(params, dict) and params.get("do_remote_decode"):
            out["kv_transfer_params"] = _NIXL
        return web.json_response(out)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_route("GET", "/{tail:.*}", get)
    web.run_app(app, host="127.0.0.1", port=port, print=None)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], *sys.argv[3:4])
