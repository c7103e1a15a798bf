"""``servelab sim ...``: run the simulated prefill/decode workers and the faulty proxy.

A worker's command line is parsed as its engine parses its own (``servelab.sim.engineargs``: the
real argument names, ``--config``, argparse's errors and exit status 2). Knobs and faults are
read from the environment once, at start-up (flags win over env). SIGTERM/SIGINT stop a worker
cleanly. The workers' event loop: ``SERVELAB_SIM_LOOP`` (``uvloop``
or ``asyncio``, the default; ``benchmarks/sim_calibration.py --jitter --loops`` measures both).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

import click

from servelab.cli.boundary import run
from servelab.cli.numbers import Finite, Whole
from servelab.cli.sharedoption import Parsed
from servelab.core.urls import parse_url
from servelab.sim.app import serve
from servelab.sim.engineargs import ArgsExit, Engine, parse_worker_args
from servelab.sim.profile import DEFAULT_PROFILE
from servelab.sim.proxy import serve_proxy
from servelab.sim.proxyfaults import ProxyFaults
from servelab.sim.settings import Role, WorkerSettings, settings_from_args
from servelab.sim.vllm import VLLM_PROFILE, serve_vllm

__all__ = ["sim_group"]

#: ``sim prefill|decode`` hand their whole command line to the engine's own parser (click's
#: context settings; with ``add_help_option=False``, ``--help`` is the engine's).
_ENGINE_CONTEXT = {"ignore_unknown_options": True, "allow_extra_args": False}


async def _until_signal(main: Any, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await main


async def _worker_main(settings: WorkerSettings, engine: Engine) -> None:
    where = f"{settings.host}:{settings.port}"
    knob = f"{settings.profile.knob_name}={settings.target_ctas}"
    click.echo(
        f"servelab sim {settings.role} ({engine}) on {where} ({knob}, time scale "
        f"{settings.time_scale:g})",
        err=True,
    )
    stop = asyncio.Event()
    if engine is Engine.VLLM:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        await _until_signal(serve_vllm(settings, stop), stop)
    else:
        await _until_signal(serve(settings, stop), stop)


def _run_worker(role: Role, argv: tuple[str, ...]) -> None:
    """Parse the worker's command line as its engine would (argparse: a usage error is printed
    on stderr with exit status 2, ``--help`` on stdout), then serve."""
    try:
        parsed = parse_worker_args(role, argv)
    except ArgsExit as exc:
        click.echo(exc.text, nl=False, err=exc.status != 0)
        raise SystemExit(exc.status) from None
    profile = VLLM_PROFILE if parsed.engine is Engine.VLLM else DEFAULT_PROFILE
    settings = settings_from_args(parsed, profile=profile)
    run(_worker_main(settings, parsed.engine), fast=_uvloop())


def _given(value: Any) -> bool:
    """Whether a flag was given: not None, not an unset boolean flag (``0`` is a value)."""
    return value is not None and value is not False


def _uvloop() -> bool:
    """Whether the workers run on uvloop (``SERVELAB_SIM_LOOP``)."""
    loop = os.environ.get("SERVELAB_SIM_LOOP", "asyncio")
    if loop not in ("asyncio", "uvloop"):
        raise click.BadParameter(f"SERVELAB_SIM_LOOP must be asyncio or uvloop, not {loop!r}")
    return loop == "uvloop"


@click.group("sim")
def sim_group() -> None:
    """The simulated PD engine (SGLang- or vLLM-compatible) and the faulty proxy."""


@sim_group.command("prefill", context_settings=_ENGINE_CONTEXT, add_help_option=False)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _prefill(argv: tuple[str, ...]) -> None:
    """A simulated prefill worker with its KV bootstrap server (vLLM: NIXL side channel).
    Its arguments are the engine's (``--help``)."""
    _run_worker("prefill", argv)


@sim_group.command("decode", context_settings=_ENGINE_CONTEXT, add_help_option=False)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def _decode(argv: tuple[str, ...]) -> None:
    """A simulated decode worker. Its arguments are the engine's (``--help``)."""
    _run_worker("decode", argv)


@sim_group.command("proxy")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=Whole(1, 65_535), required=True)
@click.option(
    "--upstream",
    required=True,
    type=Parsed("URL", parse_url),
    help="Base URL to forward to (the router).",
)
@click.option("--stall-reused-after", type=Whole(min=0), default=None, metavar="N")
@click.option("--buffer", is_flag=True, help="Send each response whole once it finished.")
@click.option("--cut-after-bytes", type=Whole(min=0), default=None, metavar="N")
@click.option("--chunk-delay-ms", type=Finite(min=0, max=86_400_000), default=None, metavar="MS")
@click.option("--admin", is_flag=True, help="Expose /_servelab/faults (loopback only).")
def _proxy(host: str, port: int, upstream: str, admin: bool, **flags: Any) -> None:
    """A reverse proxy with fault switches (env SERVELAB_PROXY_*; flags win)."""
    given = {k: v for k, v in flags.items() if _given(v)}
    faults = ProxyFaults.from_env().updated(given)
    click.echo(f"servelab sim proxy on {host}:{port} -> {upstream}", err=True)
    stop = asyncio.Event()
    main = serve_proxy(host, port, upstream, stop, faults=faults, admin=admin)
    run(_until_signal(main, stop))
