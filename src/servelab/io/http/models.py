"""The model a request names: the one the entry point lists, or a stop naming the URL.

smg routes by model (a model no worker serves answers 503 ``no_available_workers``), so every
command that sends traffic names a model ``GET /v1/models`` lists; when none can be read it stops
with :class:`~servelab.errors.ModelNotListed` rather than send a placeholder.
"""

from __future__ import annotations

from collections.abc import Mapping

from servelab.errors import ModelNotListed
from servelab.io.http.client import HttpClient

__all__ = ["listed_model"]


async def listed_model(
    http: HttpClient, base_url: str, timeout: float, headers: Mapping[str, str] | None = None
) -> str:
    """The first model ``base_url`` lists; :class:`ModelNotListed` naming the URL when none
    (and, when no answer came, why: refused, timed out, a certificate not trusted)."""
    listed = await http.model_list(base_url, timeout, headers)
    if listed.ok and listed.models:
        return listed.models[0]
    why = f": {listed.error}" if listed.error else ""
    raise ModelNotListed(
        f"GET {base_url.rstrip('/')}/v1/models lists no model (or did not answer{why}): the "
        "request needs the model the router serves, and servelab sends no placeholder"
    )
