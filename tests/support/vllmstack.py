"""A real simulated vLLM PD stack for tests: vLLM-sim prefill + decode + the real vllm-router.

Like :mod:`tests.support.stack` (every piece a real subprocess on free loopback ports, stopped by
process group), with ``servelab sim ... --engine vllm`` workers (``--admin``) and the router
started the way :func:`servelab.core.deploy.topology.router_argv` starts it.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

from tests.support import free_ports
from tests.support.stack import start_process, stop_process, wait_http

__all__ = ["VllmStack", "vllm_stack"]


@dataclass
class VllmStack:
    """A running vLLM stack: ``ports`` are prefill, side channel, decode, router, metrics."""

    prefill_port: int
    side_port: int
    decode_port: int
    router_port: int
    prometheus_port: int
    log_dir: Path
    time_scale: float
    procs: dict[str, Popen[bytes]] = field(default_factory=dict)

    @property
    def prefill_url(self) -> str:
        return f"http://127.0.0.1:{self.prefill_port}"

    @property
    def decode_url(self) -> str:
        return f"http://127.0.0.1:{self.decode_port}"

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def start_worker(
        self, role: str, env: Mapping[str, str] | None = None, args: Sequence[str] = ()
    ) -> None:
        """Start (or start again) one worker (``args``: more of its arguments) and wait for its
        /health."""
        argv = [sys.executable, "-m", "servelab", "sim", role, "--engine", "vllm", "--admin"]
        argv += args
        port = self.prefill_port if role == "prefill" else self.decode_port
        argv += ["--port", str(port)]
        if role == "prefill":
            argv += ["--bootstrap-port", str(self.side_port)]
        full_env = {"SERVELAB_SIM_TIME_SCALE": str(self.time_scale), **(env or {})}
        self.procs[role] = start_process(argv, self.log_dir / f"{role}.log", full_env)
        wait_http(f"http://127.0.0.1:{port}/health", 30, self.procs[role])

    def stop_worker(self, role: str) -> None:
        proc = self.procs.pop(role, None)
        if proc is not None:
            stop_process(proc)

    def start_router(self, *, wait: bool = True) -> None:
        """The real vllm-router in PD mode (NIXL), health checks every second."""
        argv = [sys.executable, "-m", "vllm_router.launch_router", "--host", "127.0.0.1"]
        argv += ["--port", str(self.router_port), "--vllm-pd-disaggregation"]
        argv += ["--prefill", self.prefill_url, "--decode", self.decode_url]
        argv += ["--kv-connector", "nixl", "--policy", "round_robin"]
        argv += ["--worker-startup-check-interval", "1", "--health-check-interval-secs", "1"]
        argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.prometheus_port)]
        self.procs["router"] = start_process(argv, self.log_dir / "router.log")
        if wait:
            wait_http(self.router_url + "/readiness", 60, self.procs["router"])

    def stop(self) -> None:
        for name in ("router", "decode", "prefill"):
            self.stop_worker(name)


@contextlib.contextmanager
def vllm_stack(
    *,
    time_scale: float = 0.05,
    decode_env: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    prefill_args: Sequence[str] = (),
    decode_args: Sequence[str] = (),
) -> Iterator[VllmStack]:
    """Prefill, decode and the router on free ports; always stopped afterwards. ``env`` goes to
    both workers, ``decode_env`` to the decode; ``*_args`` are more of a worker's arguments."""
    ports = free_ports(5)
    stack = VllmStack(*ports, Path(tempfile.mkdtemp(prefix="servelab-vllm-")), time_scale)
    try:
        stack.start_worker("prefill", env, prefill_args)
        stack.start_worker("decode", {**(env or {}), **(decode_env or {})}, decode_args)
        stack.start_router()
        yield stack
    finally:
        stack.stop()
