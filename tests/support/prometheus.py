"""A real Prometheus server (Debian's ``prometheus`` package) as a plain process for the tests.

It gets its own config file, storage directory and a free loopback listen address, scrapes the
given targets every ``interval_s``, and is stopped (by process group) at the end. Its absence
fails the test in CI or as root and skips it for a developer without root (:mod:`.sysdeps`).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support import free_port
from tests.support.stack import start_process, stop_process
from tests.support.sysdeps import missing

__all__ = ["PrometheusServer", "prometheus_binary", "prometheus_server"]


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        missing("Prometheus is not installed (no prometheus on PATH)")
    return found


@dataclass(frozen=True)
class PrometheusServer:
    url: str
    config: Path


def _config(jobs: Mapping[str, list[str]], interval_s: float) -> str:
    every = f"{round(interval_s * 1000)}ms"  # Prometheus durations are integers with a unit
    lines = ["global:", f"  scrape_interval: {every}", f"  scrape_timeout: {every}"]
    lines.append("scrape_configs:")
    for job, targets in jobs.items():
        lines += [f"  - job_name: {job}", "    static_configs:", "      - targets:"]
        lines += [f"          - '{t}'" for t in targets]
    return "\n".join(lines) + "\n"


def _wait_ready(url: str, timeout: float, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"Prometheus exited ({proc.returncode}): {log.read_text()[-1500:]}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"Prometheus at {url} not ready after {timeout:g} s")
        time.sleep(0.1)


@contextlib.contextmanager
def prometheus_server(
    workdir: Path, jobs: Mapping[str, list[str]], *, interval_s: float = 1.0
) -> Iterator[PrometheusServer]:
    """``jobs``: job name -> ``host:port`` targets (scraped at ``/metrics``)."""
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(_config(jobs, interval_s))
    port = free_port()
    argv = [
        binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    proc = start_process(argv, workdir / "prometheus.log")
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, 60, proc, workdir / "prometheus.log")
        yield PrometheusServer(url, config)
    finally:
        stop_process(proc)
