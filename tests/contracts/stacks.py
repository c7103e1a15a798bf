"""What the contract tests run: a PD stack of simulated workers behind the engine's real router,
started as a user's deployment would start them (no ``SERVELAB_SIM_EXTRAS``), tracing to an OTLP
receiver of servelab's own that runs on its own thread.

Every piece is a real subprocess on free loopback ports, stopped by process group."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any

from servelab.core.telemetry.spans import Span
from servelab.io.otlp import OtlpReceiver
from servelab.sim.settings import ENV_EXTRAS
from tests.support import free_ports
from tests.support.stack import start_process, stop_process, wait_http

__all__ = ["MODEL", "Pd", "SpanSink", "fetch", "pd_stack", "post", "router_argv"]

#: The model name the workers serve (the one string allowed to say "servelab": the spec's).
MODEL = "servelab-sim"
_SIM = [sys.executable, "-m", "servelab", "sim"]


class SpanSink:
    """servelab's OTLP receiver on a loop of its own thread (``with SpanSink() as sink:``)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._rx = OtlpReceiver()

    def __enter__(self) -> SpanSink:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._rx.__aenter__(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._rx.__aexit__(None, None, None), self._loop).result(
            10
        )
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    @property
    def endpoint(self) -> str:
        return self._rx.endpoint

    def spans(self) -> list[Span]:
        async def read() -> list[Span]:
            return self._rx.spans

        return asyncio.run_coroutine_threadsafe(read(), self._loop).result(10)

    def wait(self, done: Callable[[list[Span]], bool], timeout: float) -> list[Span]:
        """Every span so far, once ``done(spans)`` holds (bounded: then as they are)."""
        deadline = time.monotonic() + timeout
        while not done(got := self.spans()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return got


@dataclass
class Pd:
    """A running prefill + decode + router: ``engine`` names the router (``routers.toml``'s
    section): ``sglang`` (sglang-router 0.3.2) and ``smg`` (smg 1.13) over simulated SGLang
    workers, ``vllm`` (vllm-router 0.1.17) over simulated vLLM ones."""

    engine: str
    ports: list[int]
    log_dir: Path
    procs: list[Popen[bytes]] = field(default_factory=list)

    @property
    def workers(self) -> str:
        """The engine of the workers (the simulator's ``--engine``)."""
        return "vllm" if self.engine == "vllm" else "sglang"

    def url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    @property
    def prefill_url(self) -> str:
        return self.url(0)

    @property
    def decode_url(self) -> str:
        return self.url(2)

    @property
    def router_url(self) -> str:
        return self.url(3)

    @property
    def router_metrics_url(self) -> str:
        return self.url(4) + "/metrics"


def router_argv(pd: Pd) -> list[str]:
    """The real router in PD mode, as ``core.deploy.topology.router_argv`` starts it."""
    prom = ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(pd.ports[4])]
    common = ["--host", "127.0.0.1", "--port", str(pd.ports[3]), *prom]
    common += ["--health-check-interval-secs", "1"]
    if pd.engine == "vllm":
        return [sys.executable, "-m", "vllm_router.launch_router", *common,
                "--vllm-pd-disaggregation", "--prefill", pd.prefill_url, "--decode",
                pd.decode_url, "--kv-connector", "nixl", "--policy", "round_robin",
                "--worker-startup-check-interval", "1"]  # fmt: skip
    if pd.engine == "smg":
        return [sys.executable, "-m", "smg.launch_router", *common,
                "--pd-disaggregation", "--prefill", pd.prefill_url, str(pd.ports[1]),
                "--decode", pd.decode_url, "--policy", "round_robin",
                "--worker-startup-timeout-secs", "60", "--worker-startup-check-interval", "1",
                ]  # fmt: skip
    return [sys.executable, "-m", "sglang_router.launch_router", *common,
            "--pd-disaggregation", "--prefill", pd.prefill_url, str(pd.ports[1]),
            "--decode", pd.decode_url, "--policy", "round_robin",
            "--worker-startup-timeout-secs", "60"]  # fmt: skip


@contextlib.contextmanager
def pd_stack(
    engine: str,
    log_dir: Path,
    *,
    worker_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    router: bool = True,
) -> Iterator[Pd]:
    """Prefill (its bootstrap / NIXL side channel port), decode and the router, on free ports;
    ``worker_args`` go to both workers (the engine's own arguments)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    pd = Pd(engine, free_ports(5), log_dir)
    full_env = {ENV_EXTRAS: "", "SERVELAB_SIM_TIME_SCALE": "0.05", **(env or {})}
    head = [] if pd.workers == "sglang" else ["--engine", "vllm"]
    try:
        for role, port in (("prefill", 0), ("decode", 2)):
            argv = [*_SIM, role, *head, "--port", str(pd.ports[port]), *worker_args]
            if role == "prefill":
                argv += ["--bootstrap-port", str(pd.ports[1])]
            pd.procs.append(start_process(argv, log_dir / f"{role}.log", full_env))
        for url, proc in zip((pd.prefill_url, pd.decode_url), pd.procs, strict=True):
            wait_http(url + "/health", 30, proc)
        if router:
            pd.procs.append(start_process(router_argv(pd), log_dir / "router.log"))
            wait_http(pd.router_url + "/readiness", 60, pd.procs[-1])
        yield pd
    finally:
        for proc in reversed(pd.procs):
            stop_process(proc)


def fetch(url: str, timeout: float = 10.0) -> tuple[int, str, str]:
    """``GET url``: status, content type, body (an HTTP error's too)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def post(
    url: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """``POST url`` with a JSON body: status and the whole body (an SSE stream read to its end)."""
    data = json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=hdrs, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
