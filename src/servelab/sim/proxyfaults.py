"""The fault switches of ``servelab sim proxy``: pure data and validation.

- ``stall_reused_after`` ``N``: a request on a client connection that already carried N requests
  is accepted and never answered (the reference incident's root cause).
- ``buffer``: a response is held until the upstream finished it, then sent in one piece (with a
  ``Content-Length``): a stream arrives all at once, its client sees no byte before the end.
- ``cut_after_bytes`` ``N``: after N bytes of a response body the connection is closed mid-body
  (no end of the chunked encoding: the client reads an incomplete body).
- ``chunk_delay_ms`` ``MS``: every forwarded body chunk waits that long first.

Set at start from ``SERVELAB_PROXY_*`` (or the CLI flags) and at run time through
``POST /_servelab/faults`` (``--admin``, loopback only) with any subset of these names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from servelab.errors import SimError
from servelab.sim.faults import parse_flag

__all__ = ["PROXY_ENV_VARS", "ProxyFaults"]

PROXY_ENV_VARS = {
    "stall_reused_after": "SERVELAB_PROXY_STALL_REUSED_AFTER",
    "buffer": "SERVELAB_PROXY_BUFFER",
    "cut_after_bytes": "SERVELAB_PROXY_CUT_AFTER_BYTES",
    "chunk_delay_ms": "SERVELAB_PROXY_CHUNK_DELAY_MS",
}


def _count(name: str, value: Any) -> int | None:
    if value is None or value == "" or value == "off":
        return None
    try:
        n = int(value)
    except (TypeError, ValueError) as exc:
        raise SimError(f"{name} must be an integer or null, got {value!r}") from exc
    if n < 0:
        raise SimError(f"{name} must be >= 0, got {n}")
    return n


def _delay(value: Any) -> float:
    if value is None or value == "":
        return 0.0
    try:
        ms = float(value)
    except (TypeError, ValueError) as exc:
        raise SimError(f"chunk_delay_ms must be a number, got {value!r}") from exc
    if ms < 0:
        raise SimError(f"chunk_delay_ms must be >= 0, got {ms}")
    return ms


@dataclass(frozen=True)
class ProxyFaults:
    """The proxy's fault switches in effect. All off by default."""

    stall_reused_after: int | None = None
    buffer: bool = False
    cut_after_bytes: int | None = None
    chunk_delay_ms: float = 0.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProxyFaults:
        """Read the ``SERVELAB_PROXY_*`` variables (the process env by default)."""
        source = os.environ if env is None else env
        values = {k: source[v] for k, v in PROXY_ENV_VARS.items() if source.get(v, "") != ""}
        return cls().updated(values)

    def updated(self, changes: Mapping[str, Any]) -> ProxyFaults:
        """A copy with ``changes`` applied (JSON from the admin API, env text or flags)."""
        unknown = set(changes) - set(PROXY_ENV_VARS)
        if unknown:
            raise SimError(f"unknown proxy fault(s): {', '.join(sorted(unknown))}")
        new: dict[str, Any] = {}
        for name in ("stall_reused_after", "cut_after_bytes"):
            if name in changes:
                new[name] = _count(name, changes[name])
        if "buffer" in changes:
            new["buffer"] = parse_flag("buffer", changes["buffer"])
        if "chunk_delay_ms" in changes:
            new["chunk_delay_ms"] = _delay(changes["chunk_delay_ms"])
        return replace(self, **new)

    def stalls(self, carried_before: int) -> bool:
        """Whether a request on a connection that already carried that many is stalled."""
        n = self.stall_reused_after
        return n is not None and carried_before >= n

    def as_json(self) -> dict[str, Any]:
        """The switches as JSON."""
        return asdict(self)
