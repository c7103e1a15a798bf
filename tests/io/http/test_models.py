"""``listed_model``: the first model the entry point lists, else a stop naming the URL and, when
nothing answered, why (refused here; a certificate not trusted in
``tests/ops/soak/test_https_forward_proxy.py``)."""

from __future__ import annotations

import pytest

from servelab.errors import ModelNotListed
from servelab.io.http.client import HttpClient
from servelab.io.http.models import listed_model
from tests.support import free_port
from tests.support.servers import MODEL, served, streaming_app


async def test_the_first_listed_model() -> None:
    async with served(streaming_app()) as url, HttpClient() as http:
        assert await listed_model(http, url + "/", 5) == MODEL


async def test_no_answer_names_the_url_and_why() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with HttpClient() as http:
        with pytest.raises(ModelNotListed) as stop:
            await listed_model(http, url, 2)
    text = str(stop.value)
    assert text.startswith(f"GET {url}/v1/models lists no model (or did not answer: ")
    assert "ClientConnectorError" in text or "Connect" in text, text
