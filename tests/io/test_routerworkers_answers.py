"""A router whose ``/workers`` answer is no worker list, a token in it (issue 38's seventh pass):
the error quotes the answer through the one redaction policy (a real aiohttp server on a free
loopback port), as do verify's checks that name such an error."""

from __future__ import annotations

import json

import pytest

from servelab.errors import RouterApiError, WorkerListError
from servelab.io.http.client import HttpClient
from servelab.io.routerworkers import parse_worker_list, router_workers
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


@pytest.mark.parametrize(
    ("body", "said"),
    [('{"workers": "oops"}', '"workers" is a string, not a list'),
     ('{"workers": {"a": 1}}', '"workers" is an object, not a list'),
     ('{"workers": null}', '"workers" is null, not a list'),
     ('{"nodes": []}', 'an object without a "workers" list'),
     ("[1, 2]", "not a worker list: a list"), ('"oops"', "not a worker list: a string"),
     ('{"workers": [{"url": "http://h:1"}, 7]}', "worker 2 of 2 is a number, not an object"),
     ("<html>", "not a worker list: <html>")],
)  # fmt: skip
def test_a_worker_list_of_another_shape_is_refused_naming_what_was_wrong(
    body: str, said: str
) -> None:
    """Issue 38, eighth hostile pass: a body of another shape was read as no workers."""
    with pytest.raises(WorkerListError) as caught:
        parse_worker_list("http://r:1/workers", body)
    assert str(caught.value).startswith("GET http://r:1/workers: not a worker list")
    assert said in str(caught.value), str(caught.value)


def test_control_characters_in_a_listed_worker_are_escaped() -> None:
    bad = "\x1b[2J\x00\n\u202e"
    body = json.dumps({"workers": [{"id": "w" + bad, "url": "http://h:1" + bad,
                                    "worker_type": "decode" + bad, "status": bad}]})  # fmt: skip
    (worker,) = parse_worker_list("http://r/workers", body)
    shown = json.dumps(worker.to_json(), ensure_ascii=False) + str(worker)
    assert not any(c in shown for c in "\x1b\x00\n\u202e"), shown
    assert worker.role == "decode\\x1b[2J\\x00\\x0a\\u202e"


async def test_a_routers_garbage_answer_is_refused_over_http() -> None:
    body = '{"workers": "oops"} \x1b[31m\x00'  # raw control characters: not JSON even
    async with served(answering_app(200, body, "application/json")) as base, HttpClient() as http:
        with pytest.raises(WorkerListError) as caught:
            await router_workers("smg", base, http).list()
    assert f"GET {base}/workers: not a worker list" in str(caught.value)
    assert "\x1b" not in str(caught.value) and "\\x1b[31m\\x00" in str(caught.value)
