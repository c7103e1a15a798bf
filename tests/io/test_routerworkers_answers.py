"""A router whose ``/workers`` answer is no worker list, a token in it (issue 38's seventh pass):
the error quotes the answer through the one redaction policy (a real aiohttp server on a free
loopback port), as do verify's checks that name such an error."""

from __future__ import annotations

import json

import pytest

from servelab.errors import RouterApiError
from servelab.io.http.client import HttpClient
from servelab.io.routerworkers import router_workers
from servelab.ops.verify.layers.reader import error_text
from tests.support.servers import answering_app, served

TOKEN = "ghp_WWWWplanted0123456789abcdef"


async def test_a_token_in_an_answer_that_is_no_worker_list_is_masked() -> None:
    body = json.dumps({"note": f"rotate {TOKEN}", "status": "ok"})
    async with served(answering_app(200, body, "application/json")) as base, HttpClient() as http:
        with pytest.raises(RouterApiError) as caught:
            await router_workers("sglang-router", base, http).list()
    message = str(caught.value)
    assert "not a worker list" in message and "rotate ***" in message, message
    assert TOKEN not in message


def test_a_checks_error_text_masks_what_the_message_quotes() -> None:
    said = error_text(RouterApiError(f"GET http://h/workers: HTTP 500 {{'key': '{TOKEN}'}}"))
    assert said.startswith("RouterApiError: GET http://h/workers: HTTP 500") and TOKEN not in said
