"""A real simulated PD stack for tests: prefill + decode + the real router (sglang-router 0.3.2, or
smg 1.13.0 with ``router_kind="smg"``) (+ the proxy).

Every piece is a real subprocess on free loopback ports, in its own process group, stopped by
process group. Usage::

    from tests.support.stack import sim_stack

    with sim_stack(time_scale=0.05, decode_env={"SGLANG_SM120_MMA_TARGET_CTAS": "512"}) as st:
        httpx_or_aiohttp.post(st.router_url + "/v1/chat/completions", ...)
        st.restart_workers(decode_env={...})   # same ports; knobs are read at start-up only

API: :func:`sim_stack` (context manager) / :func:`start_stack` -> :class:`SimStack` with
``prefill_url``, ``decode_url``, ``router_url``, ``proxy_url`` (None without proxy),
``bootstrap_port``, ``log_dir``, ``restart_workers()``, ``stop()``; plus :func:`wait_http` and
:func:`stop_process` for single processes. Workers run with ``--admin`` (faults switchable through
``POST {url}/_servelab/faults``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import free_ports

__all__ = ["SimStack", "sim_stack", "start_process", "start_stack", "stop_process", "wait_http"]


def wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``url`` until it answers 200; raise if ``timeout`` passes or ``proc`` exits."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process for {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout} s ({last})")


def start_process(
    argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new process group, output to ``log``."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True
        )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still alive after ``timeout``."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
    else:  # the leader is gone; its group may not be
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


@dataclass
class SimStack:
    """A running stack. Create with :func:`start_stack` or :func:`sim_stack`."""

    prefill_port: int
    bootstrap_port: int
    decode_port: int
    router_port: int
    prometheus_port: int
    proxy_port: int | None
    log_dir: Path
    time_scale: float
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: The prefill's own arguments at every (re)start (``--disable-radix-cache``...).
    prefill_args: tuple[str, ...] = ()
    #: The router: ``sglang-router`` (0.3.2) or ``smg`` (1.13.0).
    router_kind: str = "sglang-router"

    @property
    def prefill_url(self) -> str:
        return f"http://127.0.0.1:{self.prefill_port}"

    @property
    def decode_url(self) -> str:
        return f"http://127.0.0.1:{self.decode_port}"

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    @property
    def proxy_url(self) -> str | None:
        return None if self.proxy_port is None else f"http://127.0.0.1:{self.proxy_port}"

    def _worker_env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {"SERVELAB_SIM_TIME_SCALE": str(self.time_scale), **self.env}
        env.update(extra or {})
        return env

    def start_workers(
        self,
        prefill_env: Mapping[str, str] | None = None,
        decode_env: Mapping[str, str] | None = None,
        decode_args: Sequence[str] = (),
        timeout: float = 30.0,
    ) -> None:
        """Start (or start again) prefill then decode, and wait for their /health."""
        py = [sys.executable, "-m", "servelab", "sim"]
        prefill = [*py, "prefill", "--port", str(self.prefill_port)]
        prefill += ["--bootstrap-port", str(self.bootstrap_port), "--admin", "--enable-metrics"]
        prefill += self.prefill_args
        decode = [*py, "decode", "--port", str(self.decode_port), "--admin", "--enable-metrics"]
        decode += decode_args
        self.procs["prefill"] = start_process(
            prefill, self.log_dir / "prefill.log", self._worker_env(prefill_env)
        )
        self.procs["decode"] = start_process(
            decode, self.log_dir / "decode.log", self._worker_env(decode_env)
        )
        wait_http(self.prefill_url + "/health", timeout, self.procs["prefill"])
        wait_http(self.decode_url + "/health", timeout, self.procs["decode"])

    def stop_workers(self) -> None:
        """Stop decode then prefill."""
        for name in ("decode", "prefill"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                stop_process(proc)

    def restart_workers(
        self,
        prefill_env: Mapping[str, str] | None = None,
        decode_env: Mapping[str, str] | None = None,
        decode_args: Sequence[str] = (),
    ) -> None:
        """Restart both workers on the same ports (new env), then wait for the router."""
        self.stop_workers()
        self.start_workers(prefill_env, decode_env, decode_args)
        if "router" in self.procs:
            wait_http(self.router_url + "/readiness", 60, self.procs["router"])

    def start_router(self, timeout: float = 60.0, extra: Sequence[str] = ()) -> None:
        """Start the real router (:attr:`router_kind`: sglang-router or smg) in PD mode
        (``extra`` arguments appended) and wait for ``/readiness`` 200."""
        module = "smg.launch_router" if self.router_kind == "smg" else "sglang_router.launch_router"
        argv = [sys.executable, "-m", module, "--host", "127.0.0.1"]
        argv += ["--port", str(self.router_port), "--pd-disaggregation"]
        argv += ["--prefill", self.prefill_url, str(self.bootstrap_port)]
        argv += ["--decode", self.decode_url, "--policy", "round_robin"]
        argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.prometheus_port)]
        argv += ["--worker-startup-timeout-secs", "60", "--health-check-interval-secs", "1"]
        if self.router_kind == "smg":
            argv += ["--worker-startup-check-interval", "1"]  # as servelab starts it
        argv += list(extra)
        self.procs["router"] = start_process(argv, self.log_dir / "router.log")
        wait_http(self.router_url + "/readiness", timeout, self.procs["router"])

    def start_proxy(self, args: Sequence[str] = ()) -> None:
        """Start ``servelab sim proxy`` in front of the router."""
        assert self.proxy_port is not None
        argv = [sys.executable, "-m", "servelab", "sim", "proxy", "--port", str(self.proxy_port)]
        argv += ["--upstream", self.router_url, "--admin", *args]
        self.procs["proxy"] = start_process(argv, self.log_dir / "proxy.log")
        wait_http(f"{self.proxy_url}/_servelab/faults", 30, self.procs["proxy"])

    def stop(self) -> None:
        """Stop everything (proxy, router, decode, prefill), each by process group."""
        for name in ("proxy", "router"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                stop_process(proc)
        self.stop_workers()


def start_stack(
    *,
    time_scale: float = 0.05,
    env: Mapping[str, str] | None = None,
    prefill_env: Mapping[str, str] | None = None,
    decode_env: Mapping[str, str] | None = None,
    decode_args: Sequence[str] = (),
    prefill_args: Sequence[str] = (),
    router: bool = True,
    router_args: Sequence[str] = (),
    proxy: bool = False,
    proxy_args: Sequence[str] = (),
    log_dir: Path | None = None,
    router_kind: str = "sglang-router",
) -> SimStack:
    """Start prefill, decode, (router), (proxy) on free loopback ports; stop all on failure.

    ``env`` goes to both workers, ``prefill_env``/``decode_env`` to one of them.
    """
    ports = free_ports(6)
    logs = log_dir or Path(tempfile.mkdtemp(prefix="servelab-sim-"))
    stack = SimStack(
        prefill_port=ports[0],
        bootstrap_port=ports[1],
        decode_port=ports[2],
        router_port=ports[3],
        prometheus_port=ports[4],
        proxy_port=ports[5] if proxy else None,
        log_dir=logs,
        time_scale=time_scale,
        env=dict(env or {}),
        prefill_args=tuple(prefill_args),
        router_kind=router_kind,
    )
    try:
        stack.start_workers(prefill_env, decode_env, decode_args)
        if router or proxy:
            stack.start_router(extra=router_args)
        if proxy:
            stack.start_proxy(proxy_args)
    except BaseException:
        stack.stop()
        raise
    return stack


@contextlib.contextmanager
def sim_stack(**kwargs: object) -> Iterator[SimStack]:
    """:func:`start_stack` as a context manager that always stops the stack."""
    stack = start_stack(**kwargs)  # type: ignore[arg-type]
    try:
        yield stack
    finally:
        stack.stop()
