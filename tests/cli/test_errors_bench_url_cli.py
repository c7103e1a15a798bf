"""``bench --url`` reads the model list first: a URL that is not an OpenAI server, or where nothing
listens, fails in one line naming it; the OpenAI SDK's base URL (``.../v1/``) is accepted. Real
processes, real loopback servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import free_port
from tests.support.clierrors import (
    arun,
    failure_doc,
    one_line,
)
from tests.support.servers import answering_app, served, streaming_app

HTML = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>hi</body></html>"


@pytest.mark.parametrize(
    ("status", "body", "content_type", "words"),
    [
        (404, HTML, "text/html", ["HTTP 404", "text/html", "Welcome to nginx!"]),
        (200, HTML, "text/html", ["HTTP 200", "text/html", "not an OpenAI model list"]),
        (200, '{"hello": 1}', "application/json", ["application/json", "not an OpenAI model"]),
    ],
    ids=["html-404", "html-200", "json-not-a-list"],
)
async def test_bench_url_that_is_not_an_openai_server_is_one_line(
    status: int, body: str, content_type: str, words: list[str], tmp_path: Path
) -> None:
    async with served(answering_app(status, body, content_type)) as url:
        code, out, err = await arun("bench", "--url", url, "--no-ledger", cwd=tmp_path)
    assert code == 1
    line = one_line(err)
    assert f"{url}/v1/models" in line
    for word in words:
        assert word in line
    assert "<html" not in line.lower()
    assert out == ""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
async def test_bench_url_with_nothing_listening_is_one_line(as_json: bool, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    json_flag = ("--json",) if as_json else ()
    code, out, err = await arun(
        "bench", "--url", url, "--model", "m", "--no-ledger", *json_flag, cwd=tmp_path
    )
    assert code == 1
    line = one_line(err)
    assert f"{url}/v1/models" in line and "no answer" in line
    if as_json:
        assert "no answer" in failure_doc(out)["error"]
    else:
        assert out == ""


async def test_bench_url_accepts_the_openai_sdk_base_url(tmp_path: Path) -> None:
    async with served(streaming_app(gap_s=0.001)) as url:
        code, out, err = await arun(
            "bench", "--url", f"{url}/v1/", "--requests", "2", "--no-ledger", "--json",
            cwd=tmp_path,
        )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["url"] == url and doc["config"]["model"] == "sim-model"
