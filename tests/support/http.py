"""Small blocking HTTP helpers for tests against real loopback services (stdlib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

__all__ = ["get_json", "get_status", "metric", "post", "set_faults", "sse_events"]


def post(url: str, body: Any, timeout: float = 30.0, raw: bytes | None = None) -> tuple[int, bytes]:
    """POST JSON (or ``raw`` bytes); returns (status, body) also for HTTP errors."""
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def set_faults(base: str, **changes: object) -> dict[str, object]:
    """Switch a sim worker's or the proxy's faults at run time (its admin endpoint)."""
    status, body = post(base + "/_servelab/faults", changes)
    assert status == 200, body
    return dict(json.loads(body))


def get_json(url: str, timeout: float = 10.0) -> Any:
    """GET a JSON document."""
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def get_status(url: str, timeout: float = 5.0) -> int:
    """The HTTP status of a GET (0 when the connection fails)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def metric(base: str, name: str) -> float:
    """The value of one unlabelled-by-us sample of ``name`` in ``{base}/metrics``."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def sse_events(body: bytes) -> list[Any]:
    """The JSON payloads of an SSE body, without ``[DONE]``."""
    out = []
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out
