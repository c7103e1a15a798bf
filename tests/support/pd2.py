"""A 1P2D simulated stack for tests: one prefill, two decodes, the real sglang-router in front.

Every piece is a real subprocess on free loopback ports (workers with ``--admin``). Usage::

    from tests.support.pd2 import two_decode_stack

    with two_decode_stack(decode_envs=({"SERVELAB_SIM_WEDGE": "1"}, {})) as st:
        st.decode_urls[0]   # the first decode (here started wedged)
        st.router_url, st.prometheus_url

``router_args`` are appended to the router's command line (e.g. ``--cb-failure-threshold 3``).
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

__all__ = ["TwoDecodeStack", "two_decode_stack"]

_SIM = [sys.executable, "-m", "servelab", "sim"]


@dataclass
class TwoDecodeStack:
    """Ports: prefill, bootstrap, decode a, decode b, router, prometheus."""

    ports: list[int]
    log_dir: Path
    procs: list[Popen[bytes]] = field(default_factory=list)

    def _url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    @property
    def prefill_url(self) -> str:
        return self._url(0)

    @property
    def bootstrap_port(self) -> int:
        return self.ports[1]

    @property
    def decode_urls(self) -> tuple[str, str]:
        return self._url(2), self._url(3)

    @property
    def router_url(self) -> str:
        return self._url(4)

    @property
    def prometheus_url(self) -> str:
        return f"{self._url(5)}/metrics"

    def stop(self) -> None:
        """Stop the router, then the workers, each by process group."""
        for proc in reversed(self.procs):
            stop_process(proc)
        self.procs.clear()


def _start_workers(st: TwoDecodeStack, envs: Sequence[Mapping[str, str]]) -> None:
    p, boot, a, b = st.ports[:4]
    starts = [
        ([*_SIM, "prefill", "--port", str(p), "--bootstrap-port", str(boot)], envs[0], "prefill"),
        ([*_SIM, "decode", "--port", str(a)], envs[1], "decode-a"),
        ([*_SIM, "decode", "--port", str(b)], envs[2], "decode-b"),
    ]
    for argv, env, name in starts:
        argv += ["--admin", "--enable-metrics"]  # as servelab starts a simulated SGLang
        st.procs.append(start_process(argv, st.log_dir / f"{name}.log", env))
    urls = (st.prefill_url, *st.decode_urls)
    for url, proc in zip(urls, st.procs, strict=True):
        wait_http(url + "/health", 30, proc)


def _start_router(st: TwoDecodeStack, args: Sequence[str]) -> None:
    argv = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1"]
    argv += ["--port", str(st.ports[4]), "--pd-disaggregation"]
    argv += ["--prefill", st.prefill_url, str(st.bootstrap_port)]
    argv += ["--decode", st.decode_urls[0], "--decode", st.decode_urls[1]]
    argv += ["--policy", "round_robin", "--prometheus-host", "127.0.0.1"]
    argv += ["--prometheus-port", str(st.ports[5]), "--worker-startup-timeout-secs", "60"]
    argv += ["--health-check-interval-secs", "1", *args]
    st.procs.append(start_process(argv, st.log_dir / "router.log"))
    wait_http(st.router_url + "/readiness", 60, st.procs[-1])


@contextlib.contextmanager
def two_decode_stack(
    *,
    time_scale: float = 0.05,
    env: Mapping[str, str] | None = None,
    prefill_env: Mapping[str, str] | None = None,
    decode_envs: tuple[Mapping[str, str], Mapping[str, str]] = ({}, {}),
    router_args: Sequence[str] = (),
) -> Iterator[TwoDecodeStack]:
    """Start the 1P2D stack (``env`` to every worker, warm-up 0 unless given); always stop it."""
    base = {"SERVELAB_SIM_TIME_SCALE": str(time_scale), "SERVELAB_SIM_WARMUP_S": "0"}
    base.update(env or {})
    envs = [{**base, **(prefill_env or {})}, *({**base, **e} for e in decode_envs)]
    st = TwoDecodeStack(free_ports(6), Path(tempfile.mkdtemp(prefix="servelab-pd2-")))
    try:
        _start_workers(st, envs)
        _start_router(st, router_args)
        yield st
    finally:
        st.stop()
