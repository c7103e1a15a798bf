"""The router's worker API: list, add and remove workers at run time (one implementation per
router, behind :class:`RouterWorkers`).

sglang-router 0.3.2 (checked by hand, PD mode; see ``docs/commands.md``, "rolling restarts"):

- ``GET /workers`` -> ``{"workers": [{"id", "url", "worker_type", "is_healthy",
  "bootstrap_port" (prefill), ...}]}``; a worker is listed only once its ``/health`` answered.
- ``POST /workers {"url", "worker_type", "bootstrap_port"?}`` -> 202 ``{"worker_id", ...}``: the
  add runs in the background (listed within a second when the worker is up; a worker that does
  not answer is retried until ``--worker-startup-timeout-secs``, then dropped). Posting a URL the
  router already has answers 202 too and changes nothing.
- ``DELETE /workers/{id}`` -> 202 (404 ``WORKER_NOT_FOUND`` for an unknown id): gone from the list
  at once; requests already sent to it finish normally (streams included), new ones go elsewhere.

smg 1.13.0 (sglang-router's successor; ``tests/io/test_routerworkers.py`` against the real one):

- ``GET /workers``: as 0.3.2, plus each worker's ``status`` (``ready``, ``draining``,
  ``not_ready``).
- ``POST /workers`` of a URL it lists answers 409 ``WORKER_ALREADY_EXISTS`` (0.3.2: 202, a
  no-op): :meth:`SmgRouterWorkers.add` answers the listed worker's id, as 0.3.2's no-op did.
- ``DELETE /workers/{id}`` -> 202; the worker stays listed as ``draining`` (``is_healthy``
  false) for about 5 s while in-flight streams finish, then is gone; a non-UUID id answers 400
  (0.3.2: 404), an unknown UUID 404: both mean "not known".

vllm-router 0.1.17 (checked by hand, PD mode, ``--vllm-pd-disaggregation``):

- ``GET /workers`` -> ``{"workers": [{"url", "worker_type", "is_healthy", "load", ...}], "total",
  "stats"}``: no id; a worker is named by its URL.
- ``DELETE /workers/{URL, percent-encoded}`` -> 200 ``{"success": true, ...}`` (also for a URL it
  does not have); an unencoded URL in the path answers 405.
- Adding is **not possible** over HTTP in PD mode: ``POST /workers {"url", "worker_type"}`` and
  ``POST /add_worker?url=...`` answer 400 ``PD router requires specific add_prefill_server or
  add_decode_server methods``. So :attr:`VllmRouterWorkers.can_add` is False and a rolling
  restart refuses a vLLM deployment before it removes anything.

Every exchange goes through :class:`~servelab.io.http.client.HttpClient` (the one HTTP seam).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Protocol
from urllib.parse import quote

from servelab.core.deploy.probe import ProbeResult, quoted
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.printable import printable
from servelab.errors import RouterApiError, WorkerListError
from servelab.io.http.client import HttpClient

__all__ = [
    "RouterWorker",
    "RouterWorkers",
    "SglangRouterWorkers",
    "SmgRouterWorkers",
    "VllmRouterWorkers",
    "add_worker_json",
    "parse_worker_list",
    "removal_command",
    "router_workers",
]

_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class RouterWorker:
    """One worker as the router lists it."""

    id: str
    url: str
    role: str
    healthy: bool
    bootstrap_port: int | None = None
    #: smg's ``status`` (``ready``, ``draining``, ``not_ready``); None from the other routers
    #: (left out of the JSON then, so a row stored before it reads the same).
    status: Annotated[str | None, OMITTED_IF_NONE] = None

    def to_json(self) -> dict[str, Any]:
        data = {"id": self.id, "url": self.url, "role": self.role, "healthy": self.healthy,
                "bootstrap_port": self.bootstrap_port}  # fmt: skip
        return data if self.status is None else {**data, "status": self.status}


class RouterWorkers(Protocol):
    """What a rolling restart needs from a router: its workers, and adding/removing one."""

    base_url: str
    #: Whether :meth:`add` can put a worker back (a rolling restart needs it).
    can_add: bool

    async def list(self) -> list[RouterWorker]:
        """Every worker the router has registered now."""
        ...

    async def add(self, url: str, role: str, bootstrap_port: int | None = None) -> str | None:
        """Ask the router to add the worker; the id it answers with (None if it gave none)."""
        ...

    async def remove(self, worker_id: str) -> bool:
        """Ask the router to drop the worker; False when it did not know the id."""
        ...


def _add_body(url: str, role: str, bootstrap_port: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {"url": url, "worker_type": role}
    if bootstrap_port is not None:
        body["bootstrap_port"] = bootstrap_port
    return body


def add_worker_json(url: str, role: str, bootstrap_port: int | None = None) -> str:
    """The JSON text of the ``POST /workers`` body that adds the worker (as :meth:`add` sends
    it; a recovery line's ``curl -d`` carries it)."""
    return json.dumps(_add_body(url, role, bootstrap_port))


def _failure(what: str, result: ProbeResult) -> RouterApiError:
    return RouterApiError(f"{what}: {result.describe()}")


def _worker(item: dict[str, Any]) -> RouterWorker | None:
    """One listed worker; its id is the router's, else (vllm-router) its URL. An entry whose
    ``url`` is not a string (a number, a list) is kept with an empty URL, which no service has
    and ``init`` says is not a worker (never dropped unsaid). Every string is the router's text:
    its control characters escaped (:func:`~servelab.core.printable.printable`)."""
    if "url" not in item:
        return None
    url = printable(item["url"].rstrip("/")) if isinstance(item["url"], str) else ""
    port, status = item.get("bootstrap_port"), item.get("status")
    worker_id = item.get("id")
    return RouterWorker(
        id=printable(worker_id) if isinstance(worker_id, str) else url,
        url=url,
        role=printable(str(item.get("worker_type", ""))),
        healthy=bool(item.get("is_healthy")),
        bootstrap_port=port if isinstance(port, int) else None,
        status=printable(status) if isinstance(status, str) else None,
    )


def _kind(value: Any) -> str:
    """A JSON value's kind, as an error names it."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), "a number")


def parse_worker_list(url: str, body: str) -> list[RouterWorker]:
    """The workers of a ``GET /workers`` answer (``url``: where it came from; sans-I/O): an
    object whose ``workers`` is a list of objects. A body of another shape raises
    :class:`~servelab.errors.WorkerListError` naming ``url`` and what was wrong (never a list
    read as empty)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # not JSON, or nested deeper than a parser goes
        raise WorkerListError(f"GET {url}: not a worker list: {quoted(body)}") from exc
    if not isinstance(doc, dict) or "workers" not in doc:
        what = f'{_kind(doc)} without a "workers" list' if isinstance(doc, dict) else _kind(doc)
        raise WorkerListError(f"GET {url}: not a worker list: {what}: {quoted(body)}")
    items = doc["workers"]
    if not isinstance(items, list):
        raise WorkerListError(
            f'GET {url}: not a worker list: "workers" is {_kind(items)}, not a list: {quoted(body)}'
        )
    for place, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise WorkerListError(
                f"GET {url}: not a worker list: worker {place} of {len(items)} is "
                f"{_kind(item)}, not an object: {quoted(json.dumps(item))}"
            )
    workers = [_worker(item) for item in items]
    return [worker for worker in workers if worker is not None]


async def _list(http: HttpClient, base_url: str) -> list[RouterWorker]:
    url = base_url + "/workers"
    result = await http.probe(url, timeout=_TIMEOUT_S, body_limit=None)
    if result.status != 200:
        raise _failure(f"GET {url}", result)
    return parse_worker_list(url, result.body)


class SglangRouterWorkers:
    """sglang-router 0.3.2's ``/workers`` API at ``base_url``."""

    can_add = True

    def __init__(self, base_url: str, http: HttpClient) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http

    async def list(self) -> list[RouterWorker]:
        return await _list(self._http, self.base_url)

    async def add(self, url: str, role: str, bootstrap_port: int | None = None) -> str | None:
        body = _add_body(url, role, bootstrap_port)
        where = self.base_url + "/workers"
        result = await self._http.probe(
            where, timeout=_TIMEOUT_S, method="POST", json_body=body, body_limit=None
        )
        if result.status not in (200, 201, 202):
            return await self._not_added(f"POST {where} {json.dumps(body)}", result, url)
        try:
            worker_id = json.loads(result.body).get("worker_id")
        except (ValueError, AttributeError):
            return None
        return worker_id if isinstance(worker_id, str) else None

    async def _not_added(self, what: str, result: ProbeResult, url: str) -> str | None:
        raise _failure(what, result)

    async def remove(self, worker_id: str) -> bool:
        where = f"{self.base_url}/workers/{worker_id}"
        result = await self._http.probe(where, timeout=_TIMEOUT_S, method="DELETE")
        if result.status == 404:
            return False
        if result.status not in (200, 202, 204):
            raise _failure(f"DELETE {where}", result)
        return True


class SmgRouterWorkers(SglangRouterWorkers):
    """smg 1.13.0's ``/workers`` API: 0.3.2's, with a conflict for a URL it already lists (the
    listed worker's id is the answer) and 400 for an id that is not a UUID (not known)."""

    async def _not_added(self, what: str, result: ProbeResult, url: str) -> str | None:
        """409 ``WORKER_ALREADY_EXISTS``: the URL is listed; its id (as 0.3.2's no-op gave)."""
        listed = [w for w in await self.list() if w.url == url.rstrip("/")]
        if result.status != 409 or not listed:
            raise _failure(what, result)
        return listed[0].id

    async def remove(self, worker_id: str) -> bool:
        where = f"{self.base_url}/workers/{quote(worker_id, safe='')}"
        result = await self._http.probe(where, timeout=_TIMEOUT_S, method="DELETE")
        if result.status in (400, 404):
            return False
        if result.status not in (200, 202, 204):
            raise _failure(f"DELETE {where}", result)
        return True


class VllmRouterWorkers:
    """vllm-router 0.1.17's ``/workers`` API at ``base_url``: list and remove (by URL); it cannot
    add a worker in PD mode (:meth:`add` raises)."""

    can_add = False

    def __init__(self, base_url: str, http: HttpClient) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http

    async def list(self) -> list[RouterWorker]:
        return await _list(self._http, self.base_url)

    async def add(self, url: str, role: str, bootstrap_port: int | None = None) -> str | None:
        raise RouterApiError(
            f"vllm-router cannot add {url} back: in PD mode its POST /workers answers 400 "
            "(PD router requires specific add_prefill_server or add_decode_server methods); "
            "restart the router to register it again (`servelab restart ROUTER`)"
        )

    async def remove(self, worker_id: str) -> bool:
        where = f"{self.base_url}/workers/{quote(worker_id, safe='')}"
        result = await self._http.probe(where, timeout=_TIMEOUT_S, method="DELETE")
        if result.status not in (200, 202, 204):
            raise _failure(f"DELETE {where}", result)
        return True


_APIS: dict[str, type[SglangRouterWorkers] | type[VllmRouterWorkers]] = {
    "sglang-router": SglangRouterWorkers,
    "smg": SmgRouterWorkers,
    "vllm-router": VllmRouterWorkers,
}


def removal_command(kind: str, router_url: str, worker: RouterWorker) -> list[str]:
    """The command that removes ``worker`` from a ``kind`` router at ``router_url`` (its worker
    API: sglang-router and smg by the id they list, vllm-router by the URL, percent-encoded)."""
    name = quote(worker.url, safe="") if kind == "vllm-router" else worker.id
    return ["curl", "-X", "DELETE", f"{router_url.rstrip('/')}/workers/{name}"]


def router_workers(kind: str, base_url: str, http: HttpClient) -> RouterWorkers:
    """The worker API of a ``kind`` router (:func:`servelab.core.deploy.rolling.router_kind`:
    ``sglang-router``, ``smg``, ``vllm-router``)."""
    api = _APIS.get(str(kind))
    if api is not None:
        return api(base_url, http)
    raise RouterApiError(
        f"no worker API is known for the {kind} router "
        "(a RouterWorkers implementation in servelab.io.routerworkers)"
    )
