"""The soak's targets for a simulated stack, shared by the soak test modules."""

from __future__ import annotations

from servelab.core.soak.result import Targets, WorkerTarget
from tests.support.stack import SimStack

__all__ = ["soak_targets"]


def soak_targets(st: SimStack) -> Targets:
    """The entry point (the proxy when the stack has one, else the router), the router, both
    workers (the prefill with its bootstrap port) and the router's Prometheus port."""
    workers = (
        WorkerTarget("prefill", "prefill", st.prefill_url, st.bootstrap_port),
        WorkerTarget("decode", "decode", st.decode_url),
    )
    metrics = f"http://127.0.0.1:{st.prometheus_port}"
    return Targets(st.proxy_url or st.router_url, st.router_url, workers, metrics_url=metrics)
