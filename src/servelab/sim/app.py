"""The aiohttp applications of the simulated prefill and decode workers (SGLang-compatible).

Endpoints (per ``shared/notes/sglang-router-pd.md``, shapes in ``tests/contracts/sglang.toml``):
``/health``, ``/health_generate``, ``/server_info``, ``/get_server_info``, ``/model_info``,
``/get_model_info``, ``/v1/models``, ``/get_load``, ``POST /flush_cache``, ``/metrics`` (with
``--enable-metrics``, as SGLang), ``/v1/chat/completions``, ``/v1/completions``, ``/generate``;
with ``--admin`` on a loopback bind also ``GET|POST /_servelab/faults``.

When its scheduler loop dies of an exception it does what SGLang does when its scheduler process
dies (``run_scheduler_process`` logs "Scheduler hit an exception" with the traceback and signals
the server, whose ``running_phase_sigquit_handler`` kills the process tree): the traceback is
logged, ``/health`` answers 503, every connection is closed and the process exits 1.

On bad input it behaves as the engine does: a prompt as long as the model's context or longer
(``--context-length``) is answered 400 in SGLang's words before anything is scheduled, and a
request whose client goes away while it waits for its prefill or its KV is cancelled (taken out of
the prefill queue, its KV reservation released), so it holds up no later request.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from servelab.errors import SimError
from servelab.sim.bootstrap import bootstrap_app
from servelab.sim.engineargs import SglangArgs
from servelab.sim.httplog import server_logger
from servelab.sim.protocol import (
    Api,
    GenRequest,
    RequestError,
    decode_body,
    done_event,
    parse_request,
)
from servelab.sim.respond import client_gone, request_facts, respond, unless_gone
from servelab.sim.serverinfo import sglang_server_info
from servelab.sim.settings import WorkerSettings
from servelab.sim.tracing import mark
from servelab.sim.worker import TransferError, Worker

__all__ = [
    "GC_GEN0_THRESHOLD",
    "WORKER_KEY",
    "make_app",
    "quiet_gc",
    "serve",
    "serve_apps",
]

WORKER_KEY = web.AppKey("worker", Worker)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    body = {"error": {"message": message, "type": kind, "code": status}}
    return web.json_response(body, status=status)


def _worker(request: web.Request) -> Worker:
    return request.app[WORKER_KEY]


# ------------------------------------------------------------------------------------ info routes
async def health(request: web.Request) -> web.Response:
    worker = _worker(request)
    if worker.crashed.is_set():
        return web.Response(status=503, text="the scheduler died")
    if worker.ready_in() > 0:
        return web.Response(status=503, text="starting")
    return web.Response(text="")


async def server_info(request: web.Request) -> web.Response:
    worker = _worker(request)
    body = sglang_server_info(worker.settings, worker.metrics.gen_throughput, worker.info())
    return web.json_response(body)


async def model_info(_: web.Request) -> web.Response:
    """SGLang's ``/model_info`` without ``model_path``/``tokenizer_path``: given a path,
    sglang-router loads a Hugging Face tokenizer from it."""
    body = {
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": "deepseek_v3",
        "architectures": ["DeepseekV3ForCausalLM"],
    }
    return web.json_response(body)


async def models(request: web.Request) -> web.Response:
    """SGLang's model card (``owned_by: sglang``, the context length)."""
    settings = _worker(request).settings
    name = settings.served_model_name
    model: dict[str, Any] = {"id": name, "object": "model", "created": int(time.time())}
    model.update({"owned_by": "sglang", "root": name, "parent": None,
                  "max_model_len": settings.limits.context_length})  # fmt: skip
    return web.json_response({"object": "list", "data": [model]})


async def get_load(request: web.Request) -> web.Response:
    """SGLang's ``/get_load`` (one object per DP rank; the token counts are not modelled)."""
    rank = {**_worker(request).load(), "num_tokens": 0, "num_pending_tokens": 0}
    return web.json_response([{**rank, "ts_tic": time.perf_counter()}])


async def flush_cache(_: web.Request) -> web.Response:
    return web.Response(text="Cache flushed.\n")


async def metrics(request: web.Request) -> web.Response:
    """SGLang serves ``/metrics`` only with ``--enable-metrics`` (404 otherwise)."""
    worker = _worker(request)
    args = worker.settings.server_args
    enabled = isinstance(args, SglangArgs) and args.enable_metrics
    if worker.faults.no_metrics or not enabled:
        return web.Response(status=404, text="404: Not Found")
    return web.Response(text=worker.metrics.render(), content_type="text/plain")


async def faults(request: web.Request) -> web.Response:
    worker = _worker(request)
    if request.method == "POST":
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise SimError("the body must be a JSON object")
            worker.set_faults(changes)
        except (ValueError, SimError) as exc:
            return _error(400, str(exc))
    state = {"wedged": worker.is_wedged(), "failing_fast": worker.failing_fast()}
    return web.json_response({**worker.faults.as_json(), **state})


# ------------------------------------------------------------------------------------ generation
async def _read(request: web.Request, api: Api) -> GenRequest | web.Response:
    try:
        body = decode_body(await request.read())
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the request body is not valid JSON")
    parsed = parse_request(api, body, _worker(request).settings.served_model_name)
    if isinstance(parsed, RequestError):
        return _error(400, parsed.message)
    return parsed


def _engine_error(status: int, message: str) -> web.Response:
    """SGLang's answer to an abort with a status (``http_exception_handler``'s ErrorResponse)."""
    body = {"object": "error", "message": message, "type": str(status), "param": None}
    return web.json_response({**body, "code": status}, status=status)


async def _transfer_failed(
    request: web.Request, req: GenRequest, err: TransferError
) -> web.StreamResponse:
    """Not streaming: 500 with the ErrorResponse. Streaming: like SGLang's chat stream, a 200
    whose only event is ``{"error": ...}`` (``create_streaming_error_response``), then [DONE]."""
    if not req.stream:
        return _engine_error(500, err.message)
    error = {"object": "error", "message": err.message, "type": "INTERNAL_SERVER_ERROR"}
    event = json.dumps({"error": {**error, "param": None, "code": 500}})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(f"data: {event}\n\n".encode() + done_event())
    await resp.write_eof()
    return resp


def _generation(api: Api) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        worker = _worker(request)
        arrived = time.time_ns()
        parsed = await _read(request, api)
        if isinstance(parsed, web.Response):
            return parsed
        mark(parsed.marks, "arrived", arrived)
        rid = uuid.uuid4().hex
        try:
            return await _generate(request, worker, parsed, rid)
        finally:
            worker.tracer.finish(request.headers, parsed.marks, request_facts(worker, parsed, rid))

    return handler


def _too_long(worker: Worker, req: GenRequest) -> web.Response | None:
    """SGLang's 400 for a prompt as long as the model's context or longer (``tokenizer_manager``
    ``_validate_one_request``): the OpenAI routes answer its ErrorResponse as it is, ``/generate``
    ``{"error": {"message": ...}}``. None when every prompt fits."""
    context = worker.settings.limits.context_length
    longest = max((item.prompt_tokens for item in req.items), default=0)
    if longest < context:
        return None
    message = (
        f"The input ({longest} tokens) is longer than the model's context length "
        f"({context} tokens)."
    )
    if req.api == "generate":
        return web.json_response({"error": {"message": message}}, status=400)
    body = {"object": "error", "message": message, "type": "BadRequestError", "param": None}
    return web.json_response({**body, "code": 400}, status=400)


async def _generate(
    request: web.Request, worker: Worker, parsed: GenRequest, rid: str
) -> web.StreamResponse:
    if worker.crashed.is_set():
        return _error(503, "the engine's scheduler died", "service_unavailable")
    if worker.ready_in() > 0:
        return _error(503, "the engine is still starting", "service_unavailable")
    refused = _too_long(worker, parsed)
    if refused is not None:
        return refused  # refused before it is scheduled: not a request the engine counts
    try:
        if worker.failing_fast():
            return _engine_error(500, "Internal server error: the engine failed the request")
        try:
            if worker.settings.role == "prefill":
                seqs = await unless_gone(request, worker.prefill_items(parsed))
                return await respond(request, worker, parsed, seqs, rid)
            result = await unless_gone(request, worker.decode_items(parsed))
        except ConnectionResetError:  # the client went away first: the request is cancelled
            if worker.settings.role == "decode":
                worker.record_abort()
            return client_gone()
        if isinstance(result, TransferError):
            return await _transfer_failed(request, parsed, result)
        return await respond(request, worker, parsed, result, rid)
    finally:
        worker.metrics.requests += 1  # SGLang counts a request once it finished, however it did


async def health_generate(request: web.Request) -> web.Response:
    return await health(request)


# ------------------------------------------------------------------------------------ assembly
#: The cyclic collector's youngest-generation threshold while serving (CPython's default: 700).
GC_GEN0_THRESHOLD = 20_000


def quiet_gc() -> None:
    """Keep the cyclic garbage collector out of the step loop's way: everything alive once the
    worker is up (modules, the app) is frozen out of every later collection (``gc.freeze``),
    and the youngest generation is collected every :data:`GC_GEN0_THRESHOLD` allocations
    instead of 700, so the costly older generations come ten times more rarely. A decode at
    C1024 (time scale 0.25, about 80,000 tokens, CPU time of each collection): with CPython's
    defaults 3 full collections took 231 ms (the longest 125 ms, a step that late) and 41 of the
    middle generation 203 ms; this way 2 full ones (one the start's own) took 79 ms and 14 of the
    middle one 21 ms."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


def make_app(settings: WorkerSettings) -> web.Application:
    """The worker app for ``settings.role``; its scheduler starts and stops with the app."""
    worker = Worker(settings)
    app = web.Application(client_max_size=64 * 1024**2)
    app[WORKER_KEY] = worker

    async def lifecycle(_: web.Application) -> Any:
        await worker.start()
        yield
        await worker.stop()

    app.cleanup_ctx.append(lifecycle)
    for path, handler in (
        ("/health", health),
        ("/health_generate", health_generate),
        ("/server_info", server_info),
        ("/get_server_info", server_info),
        ("/model_info", model_info),
        ("/get_model_info", model_info),
        ("/v1/models", models),
        ("/get_load", get_load),
        ("/metrics", metrics),
    ):
        app.router.add_get(path, handler)
    app.router.add_route("*", "/flush_cache", flush_cache)
    app.router.add_post("/v1/chat/completions", _generation("chat"))
    app.router.add_post("/v1/completions", _generation("completions"))
    app.router.add_route("*", "/generate", _generation("generate"))
    if settings.admin:
        app.router.add_route("GET", "/_servelab/faults", faults)
        app.router.add_route("POST", "/_servelab/faults", faults)
    return app


async def serve(settings: WorkerSettings, stop: asyncio.Event) -> None:
    """Run the worker (and, for a prefill, its bootstrap server) until ``stop`` is set."""
    app = make_app(settings)
    side = None
    if settings.role == "prefill" and settings.bootstrap_port is not None:
        side = bootstrap_app(app[WORKER_KEY].rooms)
    await serve_apps(settings, app, side, stop)


async def serve_apps(
    settings: WorkerSettings, app: web.Application, side: web.Application | None,
    stop: asyncio.Event,
) -> None:  # fmt: skip
    """Serve ``app`` on the worker's port (and ``side``, a prefill's bootstrap or NIXL side
    channel, on its bootstrap port) until ``stop`` is set."""
    log = server_logger()
    runners = [web.AppRunner(app, access_log=None, handler_cancellation=False, logger=log)]
    sites = [(runners[0], settings.host, settings.port)]
    if side is not None and settings.bootstrap_port is not None:
        runners.append(web.AppRunner(side, access_log=None, logger=log))
        sites.append((runners[1], settings.host, settings.bootstrap_port))
    worker = app[WORKER_KEY]
    try:
        for runner, host, port in sites:
            await runner.setup()
            try:
                await web.TCPSite(runner, host, port, backlog=1024).start()
            except OSError as exc:
                raise SimError(f"cannot listen on {host}:{port}: {exc}") from exc
        quiet_gc()
        await _until_stopped(stop, worker.crashed)
        if worker.crashed.is_set():
            await _drop_connections(runners)
            raise SimError("the scheduler died (its traceback is logged above); the engine exits")
    finally:
        for runner in reversed(runners):
            await runner.cleanup()


async def _until_stopped(stop: asyncio.Event, crashed: asyncio.Event) -> None:
    """Until ``stop`` is set or the scheduler died."""
    waits = [asyncio.create_task(stop.wait()), asyncio.create_task(crashed.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()


#: Seconds a handler gets to end once the scheduler died (its work will never complete).
_CRASH_SHUTDOWN_S = 0.2


async def _drop_connections(runners: list[web.AppRunner]) -> None:
    """The scheduler died: every connection closed now, its handler cancelled, as SGLang's
    server process is killed (``kill_process_tree``) when its scheduler dies."""
    for runner in runners:
        if runner.server is not None:
            await runner.server.shutdown(_CRASH_SHUTDOWN_S)
