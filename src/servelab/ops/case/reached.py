"""The load an answers test's visit reached on the decode (:mod:`servelab.core.case.load`).

While the visit's bench runs go, :class:`RunningWatch` reads every decode's ``/metrics`` every
:data:`INTERVAL_S` seconds and keeps its running-requests gauge (``sglang:num_running_reqs``,
``vllm:num_requests_running``: the real engines' names; summed over one decode's label sets, the
largest decode per read). When no decode answered with the gauge, the reached load is the
client's own in-flight count from the runs' request records, and says so (:func:`reached_load`).
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Sequence
from types import TracebackType

from servelab.core.case.load import client_load, engine_load
from servelab.core.case.reached import RUNNING_SERIES, ReachedLoad
from servelab.core.load.records import RequestRecord
from servelab.core.telemetry.promtext import Exposition
from servelab.core.telemetry.summary import MetricsSource
from servelab.io.http.client import HttpClient
from servelab.ops.context import Operation
from servelab.ops.telemetry.watch import metrics_sources, scrape_once

__all__ = ["INTERVAL_S", "RunningWatch", "reached_load", "running_gauge"]

#: How often the decodes' gauge is read during a visit: a closed loop sends in waves, and the
#: decode's count swings from none to its crest and back within one request's E2E (about 0.1 s
#: for an answers visit's short requests; such a run at C64 lasts about a second).
INTERVAL_S = 0.02


def running_gauge(exp: Exposition) -> tuple[str, float] | None:
    """The running-requests gauge of one read (its series, summed over label sets)."""
    for series in RUNNING_SERIES:
        values = [s.value for s in exp.samples if s.name == series]
        if values and math.isfinite(total := sum(values)):  # near-1e308 samples: not reported
            return series, total
    return None


class RunningWatch:
    """Reads the decodes' running-requests gauge around the ``async with`` body, from a thread of
    its own (its own event loop and HTTP session): on the caller's loop a read waited behind the
    bench client's work, and a starved client read the gauge a few times a second at most."""

    def __init__(self, decodes: list[MetricsSource], interval_s: float = INTERVAL_S) -> None:
        self._decodes, self._interval = decodes, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self.values: list[float] = []
        self.series = ""

    @classmethod
    async def of(cls, op: Operation) -> RunningWatch:
        return cls([s for s in await metrics_sources(op) if s.role == "decode"])

    async def _read(self, http: HttpClient) -> None:
        got = await asyncio.gather(*(scrape_once(http, s, 0.0, 2.0) for s in self._decodes))
        found = [r for g in got if g.exposition is not None
                 if (r := running_gauge(g.exposition)) is not None]  # fmt: skip
        if found:
            self.series = found[0][0]
            self.values.append(max(v for _s, v in found))

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except BaseException as exc:  # raised again in the caller's task, at the exit
            self._failed = exc

    async def _loop(self) -> None:
        async with HttpClient() as http:
            while not self._stop.is_set():
                started = time.monotonic()
                await self._read(http)
                await asyncio.sleep(max(0.0, self._interval - (time.monotonic() - started)))

    async def __aenter__(self) -> RunningWatch:
        if self._decodes:
            self._thread = threading.Thread(target=self._run, name="running-watch", daemon=True)
            self._thread.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
        if self._failed is not None and exc is None:
            raise self._failed


def reached_load(watch: RunningWatch, records: Sequence[RequestRecord]) -> ReachedLoad | None:
    """The load reached: the decode's gauge as ``watch`` read it, else the client's count."""
    reached = engine_load(watch.values, watch.series) if watch.series else None
    return reached if reached is not None else client_load(records)
