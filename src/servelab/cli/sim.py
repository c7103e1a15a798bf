"""``servelab sim ...``: run the simulated prefill/decode workers and the faulty proxy.

Knobs and faults are read from the environment once, at start-up (flags win over env).
SIGTERM/SIGINT stop a worker cleanly. The workers' event loop: ``SERVELAB_SIM_LOOP`` (``uvloop``
or ``asyncio``, the default; ``benchmarks/sim_calibration.py --jitter --loops`` measures both).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

import click

from servelab.cli.common import err_console, run
from servelab.sim.app import serve
from servelab.sim.faults import ENV_VARS as FAULT_ENV_VARS
from servelab.sim.profile import DEFAULT_PROFILE
from servelab.sim.proxy import serve_proxy
from servelab.sim.proxyfaults import ProxyFaults
from servelab.sim.settings import Role, load_settings
from servelab.sim.vllm import VLLM_PROFILE, serve_vllm

__all__ = ["register"]


async def _until_signal(main: Any, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await main


def _common(func: Any) -> Any:
    options = [
        click.option("--host", default="127.0.0.1", show_default=True),
        click.option("--port", type=int, required=True),
        click.option(
            "--time-scale",
            type=float,
            default=None,
            help="Scale of every modelled duration (env SERVELAB_SIM_TIME_SCALE; 1.0 = real "
            "time). Throughput runs on 2 cores: >= 0.5 (0.25 on a quiet box).",
        ),
        click.option("--served-model-name", default=None),
        click.option("--seed", type=int, default=None, help="Default seed of the output text."),
        click.option(
            "--warmup-s",
            type=float,
            default=None,
            help="Modelled one-time warm-up of the first request (default 17 s).",
        ),
        click.option("--admin", is_flag=True, help="Expose /_servelab/faults (loopback only)."),
        click.option("--transfer-fail-prob", type=float, default=None),
        click.option("--abort-wedge", default=None, metavar="N/T"),
        click.option("--corrupt-under-load", type=int, default=None, metavar="X"),
        click.option("--slow-start-s", type=float, default=None),
        click.option("--transfer-fail-over-tokens", type=int, default=None, metavar="N"),
        click.option("--wedge", is_flag=True, help="Start wedged (requests hang, /health 200)."),
        click.option("--no-metrics", is_flag=True, help="Answer /metrics with 404."),
        click.option("--fail-fast-s", type=float, default=None, metavar="S"),
        click.option(
            "--otlp-traces-endpoint",
            "otlp_endpoint",
            default=None,
            metavar="HOST:PORT",
            help="Export phase spans over OTLP/gRPC (env SERVELAB_SIM_OTLP_ENDPOINT), as SGLang's "
            "and vLLM's flag of the same name.",
        ),
        click.option(
            "--enable-trace",
            is_flag=True,
            help="Accepted as SGLang's flag is; the endpoint alone switches tracing on.",
        ),
        click.option(
            "--engine",
            type=click.Choice(["sglang", "vllm"]),
            default="sglang",
            show_default=True,
            help="Which engine to simulate: SGLang (bootstrap rooms) or vLLM (NIXL "
            "kv_transfer_params, vllm: metrics, knob VLLM_SM120_MMA_TARGET_CTAS).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


async def _worker_main(role: Role, opts: dict[str, Any], faults: dict[str, Any]) -> None:
    engine = opts.pop("engine", "sglang")
    opts.pop("enable_trace", None)
    profile = VLLM_PROFILE if engine == "vllm" else DEFAULT_PROFILE
    settings = load_settings(role, overrides=opts, fault_overrides=faults, profile=profile)
    err_console.print(
        f"servelab sim {role} ({engine}) on {settings.host}:{settings.port} "
        f"({settings.profile.knob_name}={settings.target_ctas}, time scale {settings.time_scale:g})"
    )
    stop = asyncio.Event()
    if engine == "vllm":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        await _until_signal(serve_vllm(settings, stop), stop)
    else:
        await _until_signal(serve(settings, stop), stop)


def _given(value: Any) -> bool:
    """Whether a flag was given: not None, not an unset boolean flag (``0`` is a value)."""
    return value is not None and value is not False


def _run_worker(role: Role, opts: dict[str, Any]) -> None:
    fault_keys = tuple(FAULT_ENV_VARS)  # an unset flag (None, False) leaves the env's value
    faults = {k: opts[k] for k in fault_keys if _given(opts.get(k))}
    for k in fault_keys:
        opts.pop(k, None)
    run(_worker_main(role, opts, faults), fast=_uvloop())


def _uvloop() -> bool:
    """Whether the workers run on uvloop (``SERVELAB_SIM_LOOP``)."""
    loop = os.environ.get("SERVELAB_SIM_LOOP", "asyncio")
    if loop not in ("asyncio", "uvloop"):
        raise click.BadParameter(f"SERVELAB_SIM_LOOP must be asyncio or uvloop, not {loop!r}")
    return loop == "uvloop"


def register(group: click.Group) -> None:
    """Add ``sim prefill``, ``sim decode`` and ``sim proxy``."""

    @group.group("sim")
    def sim() -> None:
        """The simulated PD engine (SGLang- or vLLM-compatible) and the faulty proxy."""

    @sim.command("prefill")
    @_common
    @click.option(
        "--bootstrap-port",
        type=int,
        required=True,
        help="The KV bootstrap server's port (vLLM: the NIXL side channel's).",
    )
    def prefill(**opts: Any) -> None:
        """A simulated prefill worker with its KV bootstrap server (vLLM: NIXL side channel)."""
        _run_worker("prefill", opts)

    @sim.command("decode")
    @_common
    @click.option(
        "--waiting-timeout",
        "waiting_timeout_s",
        type=float,
        default=None,
        help="Seconds a request may wait for its KV (env SGLANG_DISAGGREGATION_WAITING_TIMEOUT).",
    )
    def decode(**opts: Any) -> None:
        """A simulated decode worker."""
        _run_worker("decode", opts)

    @sim.command("proxy")
    @click.option("--host", default="127.0.0.1", show_default=True)
    @click.option("--port", type=int, required=True)
    @click.option("--upstream", required=True, help="Base URL to forward to (the router).")
    @click.option("--stall-reused-after", type=int, default=None, metavar="N")
    @click.option("--buffer", is_flag=True, help="Send each response whole once it finished.")
    @click.option("--cut-after-bytes", type=int, default=None, metavar="N")
    @click.option("--chunk-delay-ms", type=float, default=None, metavar="MS")
    @click.option("--admin", is_flag=True, help="Expose /_servelab/faults (loopback only).")
    def proxy(host: str, port: int, upstream: str, admin: bool, **flags: Any) -> None:
        """A reverse proxy with fault switches (env SERVELAB_PROXY_*; flags win)."""
        given = {k: v for k, v in flags.items() if _given(v)}
        faults = ProxyFaults.from_env().updated(given)
        err_console.print(f"servelab sim proxy on {host}:{port} -> {upstream}")
        stop = asyncio.Event()
        main = serve_proxy(host, port, upstream, stop, faults=faults, admin=admin)
        run(_until_signal(main, stop))
