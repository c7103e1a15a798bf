"""The simulated vLLM prefill and decode workers: what the real vllm-router drives in PD mode.

The same engine as the SGLang simulator (:class:`~servelab.sim.worker.Worker`: performance model,
schedulers, cold start, knobs, fault switches), behind vLLM's HTTP face and the NIXL hand-off of
:mod:`servelab.sim.nixl`:

- ``POST /v1/chat/completions``, ``/v1/completions``: on a prefill, a leg with
  ``kv_transfer_params.do_remote_decode`` is prefilled, its blocks held, and answered as JSON with
  the ``kv_transfer_params`` a decode needs; on a decode, a leg with ``do_remote_prefill`` first
  reads its blocks from the prefill those params name (a failed read answers 500), then joins the
  batch and streams. Without params either worker answers the request itself.
- ``GET /health`` (503 while starting), ``/v1/models``, ``/metrics``
  (``vllm:`` names, ``engine="0"``: the router counts ``engine`` labels to learn the
  data-parallel size; none with ``--disable-log-stats``), ``/version``, ``/server_info`` only
  with ``VLLM_SERVER_DEV_MODE=1`` as vLLM (``servelab.sim.serverinfo``; with
  ``SERVELAB_SIM_EXTRAS=1`` also the simulator's ``servelab`` object), and with ``--admin`` on a
  loopback bind ``GET|POST /_servelab/faults``. With ``SERVELAB_SIM_EXTRAS=1`` also ``/load``
  (``{"server_load": N}``: vLLM serves it only with ``--enable-server-load-tracking``) and
  ``/get_load`` (``{"load": N}``: what vllm-router's power_of_two policy polls; no vLLM serves it,
  so the router counts a real worker's load as 0).
- The ``X-Request-Id`` the router sends on both legs is logged (logger ``servelab.sim.vllm``) and
  kept in the extras' ``servelab.recent_requests``; a traced leg's ``llm_request`` span carries it
  as ``gen_ai.request.id`` (``servelab.sim.tracing``).

The decode knob is :data:`~servelab.core.engines.VLLM_KNOB` (:data:`VLLM_PROFILE`); the
prefill's bootstrap port is its NIXL side channel (vLLM's ``VLLM_NIXL_SIDE_CHANNEL_PORT``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from aiohttp import web

from servelab.core.engines import VLLM_KNOB
from servelab.errors import SimError
from servelab.sim.app import WORKER_KEY, faults, health, serve_apps
from servelab.sim.engineargs import VllmArgs
from servelab.sim.envreads import vllm_warnings
from servelab.sim.metrics import WorkerMetrics
from servelab.sim.nixl import (
    ENV_ABORT_TIMEOUT,
    BlockStore,
    KvItem,
    NixlClient,
    NixlError,
    remote_prefill,
    side_channel_app,
    transfer_params,
)
from servelab.sim.profile import DEFAULT_PROFILE
from servelab.sim.protocol import (
    Api,
    GenRequest,
    RequestError,
    decode_body,
    final_body,
    parse_request,
)
from servelab.sim.respond import cached_usage, client_gone, request_facts, respond, unless_gone
from servelab.sim.serverinfo import VLLM_SIM_VERSION, vllm_server_info
from servelab.sim.settings import WorkerSettings
from servelab.sim.tracing import mark
from servelab.sim.worker import TransferError, Worker

__all__ = [
    "ENV_DEV_MODE",
    "VLLM_KEY",
    "VLLM_PROFILE",
    "VllmState",
    "make_vllm_app",
    "render_metrics",
    "serve_vllm",
]

log = logging.getLogger("servelab.sim.vllm")

#: The SGLang simulator's profile with the vLLM decode knob.
VLLM_PROFILE = replace(
    DEFAULT_PROFILE, knob_name=VLLM_KNOB, nsa_bf16_knob_name="VLLM_NSA_INDEX_KEYS_BF16"
)
_ABORT_TIMEOUT_S = 480.0
#: ``1``: serve ``/server_info`` (vLLM's ``VLLM_SERVER_DEV_MODE``).
ENV_DEV_MODE = "VLLM_SERVER_DEV_MODE"
_RECENT = 256
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class VllmState:
    """What a vLLM worker adds to the engine: its engine id, held blocks, the NIXL client, and
    the request ids it saw."""

    def __init__(self, settings: WorkerSettings, env: Mapping[str, str]) -> None:
        self.engine_id = str(uuid.uuid4())
        #: the ``VLLM_*`` variables at start-up (``/server_info``'s ``vllm_env``)
        self.vllm_env = {k: v for k, v in env.items() if k.startswith("VLLM_")}
        for line in vllm_warnings(env, VLLM_SIM_VERSION):  # as envs.validate_environ does
            log.warning("%s", line)
        #: vLLM serves ``/server_info`` only in dev mode, read once at start-up.
        self.dev_mode = env.get(ENV_DEV_MODE, "") == "1"
        raw = env.get(ENV_ABORT_TIMEOUT, "")
        try:
            hold_s = float(raw) if raw else _ABORT_TIMEOUT_S
        except ValueError as exc:
            raise SimError(f"{ENV_ABORT_TIMEOUT} must be a number, got {raw!r}") from exc
        self.blocks = BlockStore(self.engine_id, settings.scaled(hold_s))
        self.nixl = NixlClient()
        self.recent: deque[dict[str, Any]] = deque(maxlen=_RECENT)

    def note(self, role: str, request_id: str | None, status: int, detail: str = "") -> None:
        """Log one leg with the router's X-Request-Id."""
        self.recent.append({"leg": role, "x_request_id": request_id, "status": status})
        log.info("%s leg X-Request-Id=%s status=%d %s", role, request_id, status, detail)


VLLM_KEY = web.AppKey("vllm", VllmState)


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


def _too_long(worker: Worker, req: GenRequest) -> web.Response | None:
    """vLLM's 400 for a prompt and its requested output longer than ``--max-model-len``
    (``renderers/params.py``, ``serve/utils/error_response.py``); None when every item fits."""
    context = worker.settings.limits.context_length
    for item in req.items:
        total = item.prompt_tokens + item.max_tokens
        if total > context:
            message = (
                f"This model's maximum context length is {context} tokens. However, you "
                f"requested {item.max_tokens} output tokens and your prompt contains "
                f"{item.prompt_tokens} input tokens, for a total of {total} tokens."
            )
            return _error(400, message, "BadRequestError", "input_tokens")
    return None


# ------------------------------------------------------------------------------------ info routes
def render_metrics(m: WorkerMetrics, served: int) -> str:
    """The ``/metrics`` body with vLLM's names and ``engine="0"`` on every series (a
    ``prometheus_client`` counter named ``x`` is exposed as ``x_total``)."""
    labels = f'engine="0",model_name="{m.model}"'
    series = (
        ("vllm:num_requests_running", "gauge", "", m.running),
        ("vllm:num_requests_waiting", "gauge", "", m.queued),
        ("vllm:generation_tokens_total", "counter", "", m.generation_tokens),
        ("vllm:prompt_tokens_total", "counter", "", m.prompt_tokens),
        ("vllm:request_success_total", "counter", ',finished_reason="length"', served),
        ("vllm:request_success_total", "counter", ',finished_reason="abort"', m.aborted),
        ("vllm:nixl_num_failed_transfers_total", "counter", "", m.transfer_failed),
        ("vllm:prefix_cache_queries_total", "counter", "", m.prefix_queries),
        ("vllm:prefix_cache_hits_total", "counter", "", m.prefix_hits),
        ("vllm:kv_cache_usage_perc", "gauge", "", round(m.token_usage, 4)),
    )
    lines: list[str] = []
    for name, kind, extra, value in series:
        if not lines or not lines[-1].startswith(name + "{"):
            lines += [f"# HELP {name} {name}.", f"# TYPE {name} {kind}"]
        lines.append(f"{name}{{{labels}{extra}}} {value}")
    lines += m.ttft.render("vllm:time_to_first_token_seconds", labels)
    return "\n".join(lines) + "\n"


async def metrics(request: web.Request) -> web.Response:
    """vLLM's ``/metrics``: its ``vllm:`` series unless ``--disable-log-stats``."""
    worker = request.app[WORKER_KEY]
    args = worker.settings.server_args
    if worker.faults.no_metrics:
        return web.Response(status=404, text="404: Not Found")
    logged = not (isinstance(args, VllmArgs) and args.disable_log_stats)
    text = render_metrics(worker.metrics, worker.requests_served) if logged else ""
    return web.Response(text=text, content_type="text/plain")


async def models(request: web.Request) -> web.Response:
    worker = request.app[WORKER_KEY]
    name = worker.settings.served_model_name
    model = {"id": name, "object": "model", "created": int(worker.started_at)}
    model.update({"owned_by": "vllm", "root": name, "parent": None, "max_model_len": 163840})
    return web.json_response({"object": "list", "data": [model]})


async def load(request: web.Request) -> web.Response:
    """vLLM's ``/load``: requests in the engine."""
    return web.json_response({"server_load": request.app[WORKER_KEY].load()["num_reqs"]})


async def get_load(request: web.Request) -> web.Response:
    """What vllm-router's power_of_two policy polls (it reads the ``load`` integer)."""
    return web.json_response({"load": request.app[WORKER_KEY].load()["num_reqs"]})


async def server_info(request: web.Request) -> web.Response:
    """vLLM's dev-mode ``/server_info`` (routed only with ``VLLM_SERVER_DEV_MODE=1``)."""
    worker, state = request.app[WORKER_KEY], request.app[VLLM_KEY]
    servelab = {**worker.info(), "recent_requests": list(state.recent)[-32:]}
    as_json = request.query.get("config_format") == "json"
    body = vllm_server_info(
        worker.settings, state.engine_id, state.vllm_env, servelab, as_json=as_json
    )
    return web.json_response(body)


async def version(_: web.Request) -> web.Response:
    """vLLM's ``/version`` (always served)."""
    return web.json_response({"version": VLLM_SIM_VERSION})


# ------------------------------------------------------------------------------------ generation
async def _read(request: web.Request, api: Api) -> tuple[GenRequest, Any] | web.Response:
    try:
        body = decode_body(await request.read())
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the request body is not valid JSON", "BadRequestError")
    parsed = parse_request(api, body, request.app[WORKER_KEY].settings.served_model_name)
    if isinstance(parsed, RequestError):
        return _error(400, parsed.message, "BadRequestError")
    return parsed, body.get("kv_transfer_params")


async def _prefill_leg(request: web.Request, req: GenRequest) -> web.Response:
    """Prefill, hold the blocks, answer JSON with the ``kv_transfer_params`` to pull them."""
    worker, state = request.app[WORKER_KEY], request.app[VLLM_KEY]
    seqs = await unless_gone(request, worker.prefill_items(req))
    items = tuple(KvItem(seq.out.pieces[0], seq.ctx_tokens) for seq in seqs)
    x_id = request.headers.get("X-Request-Id")
    held = state.blocks.hold(f"cmpl-{x_id or uuid.uuid4().hex}", items, time.monotonic())
    created = int(time.time())
    cached, report = cached_usage(worker, seqs)
    outs, n_outs = [s.out for s in seqs], [s.n_out for s in seqs]
    body = final_body(req, outs, n_outs, held.request_id, created, cached=cached, report=report)
    side_port = worker.settings.bootstrap_port or worker.settings.port
    body["kv_transfer_params"] = transfer_params(held, worker.settings.host, side_port)
    worker.finished()
    state.note("prefill", x_id, 200, f"blocks={len(held.block_ids)}")
    return web.json_response(body)


async def _pull(
    request: web.Request, req: GenRequest, params: Mapping[str, Any]
) -> NixlError | None:
    """Read the request's blocks from the remote prefill (None when they arrived)."""
    worker, state = request.app[WORKER_KEY], request.app[VLLM_KEY]
    got = await state.nixl.read(
        params, worker.settings.waiting_timeout_s, worker.settings.kv_layout
    )
    if not isinstance(got, NixlError) and len(got) != len(req.items):
        got = NixlError("block_ids", f"{len(got)} sequences held, {len(req.items)} requested")
    return got if isinstance(got, NixlError) else None


async def _decode_leg(request: web.Request, req: GenRequest, params: Any) -> web.StreamResponse:
    worker, state = request.app[WORKER_KEY], request.app[VLLM_KEY]
    x_id = request.headers.get("X-Request-Id")
    pulled = unless_gone(request, _pull(request, req, params)) if remote_prefill(params) else None
    failed = None if pulled is None else await pulled
    if failed is not None:
        worker.metrics.transfer_failed += 1
        state.note("decode", x_id, 500, failed.message)
        return _error(500, failed.message, "InternalServerError")
    result = await unless_gone(request, worker.decode_items(req, handoff=pulled is not None))
    if isinstance(result, TransferError):
        state.note("decode", x_id, 500, result.message)
        return _error(500, result.message, "InternalServerError")
    state.note("decode", x_id, 200)
    return await respond(request, worker, req, result)


def _generation(api: Api) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        worker = request.app[WORKER_KEY]
        arrived = time.time_ns()
        read = await _read(request, api)
        if isinstance(read, web.Response):
            return read
        req, params = read
        if worker.ready_in() > 0:
            return _error(503, "the engine is still starting", "ServiceUnavailableError")
        refused = _too_long(worker, req)
        if refused is not None:
            return refused
        mark(req.marks, "arrived", arrived)
        worker.metrics.requests += 1
        try:
            return await _serve_leg(request, req, params)
        except ConnectionResetError:  # the client went away first: the request is cancelled
            return client_gone()
        finally:
            facts = request_facts(worker, req, uuid.uuid4().hex)
            worker.tracer.finish(request.headers, req.marks, facts)

    return handler


async def _serve_leg(request: web.Request, req: GenRequest, params: Any) -> web.StreamResponse:
    """A decode leg, a prefill leg, or (no ``kv_transfer_params``) the whole request here."""
    worker = request.app[WORKER_KEY]
    if worker.settings.role == "decode":
        return await _decode_leg(request, req, params)
    if isinstance(params, dict) and params.get("do_remote_decode") is True:
        return await _prefill_leg(request, req)
    return await respond(
        request, worker, req, await unless_gone(request, worker.prefill_items(req))
    )


# ------------------------------------------------------------------------------------ assembly
def make_vllm_app(
    settings: WorkerSettings, env: Mapping[str, str] | None = None
) -> web.Application:
    """The vLLM worker app for ``settings.role``; scheduler and NIXL client live with the app."""
    worker = Worker(settings)
    state = VllmState(settings, os.environ if env is None else env)
    app = web.Application(client_max_size=64 * 1024**2)
    app[WORKER_KEY] = worker
    app[VLLM_KEY] = state

    async def lifecycle(_: web.Application) -> Any:
        await worker.start()
        yield
        await worker.stop()
        await state.nixl.close()

    app.cleanup_ctx.append(lifecycle)
    for path, handler in (
        ("/health", health),
        ("/v1/models", models),
        ("/metrics", metrics),
        ("/version", version),
    ):
        app.router.add_get(path, handler)
    if settings.extras:  # not vLLM's by default: ``/load`` needs a flag, ``/get_load`` is none
        app.router.add_get("/load", load)
        app.router.add_get("/get_load", get_load)
    if state.dev_mode:
        app.router.add_get("/server_info", server_info)
    app.router.add_post("/v1/chat/completions", _generation("chat"))
    app.router.add_post("/v1/completions", _generation("completions"))
    if settings.admin:
        app.router.add_route("GET", "/_servelab/faults", faults)
        app.router.add_route("POST", "/_servelab/faults", faults)
    return app


async def serve_vllm(settings: WorkerSettings, stop: asyncio.Event) -> None:
    """Run the worker (and, for a prefill, its NIXL side channel) until ``stop`` is set."""
    app = make_vllm_app(settings)
    side = None
    if settings.role == "prefill" and settings.bootstrap_port is not None:
        side = side_channel_app(app[VLLM_KEY].blocks, settings.kv_layout)
    await serve_apps(settings, app, side, stop)
