"""How a stream leaves the decode worker: the response's head, the stream's start and the tokens
emitted so far in one write (one HTTP/1.1 chunk after the head), then a chunk per step, and the
stream's end in one write: one ``send`` per token and item, not one more per item."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator

import pytest

from tests.support import free_ports
from tests.support.stack import start_process, stop_process, wait_http


@pytest.fixture(scope="module")
def decode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A decode worker answering direct (non-PD) requests; its port."""
    (port,) = free_ports(1)
    argv = [sys.executable, "-m", "servelab", "sim", "decode", "--port", str(port)]
    argv += ["--time-scale", "0.05"]
    log = tmp_path_factory.mktemp("decode") / "decode.log"
    proc = start_process(argv, log, env={"SERVELAB_SIM_WARMUP_S": "0"})
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, proc)
        yield port
    finally:
        stop_process(proc)


def _chunks(port: int, path: str, body: dict[str, object]) -> list[bytes]:
    """The HTTP/1.1 chunks of one streamed answer, read off the wire as they were framed."""
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + data)
        raw = b""
        for _ in range(10_000):  # bounded: an answer of a few tokens is a few reads
            got = sock.recv(65536)
            if not got:
                break
            raw += got
    status, _, rest = raw.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200") and b"chunked" in status.lower(), status
    chunks = []
    while True:
        size, _, rest = rest.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return chunks
        chunks.append(rest[:n])
        assert rest[n : n + 2] == b"\r\n"
        rest = rest[n + 2 :]


def _events(chunk: bytes) -> list[str]:
    return [e for e in chunk.decode().split("\n\n") if e]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi there"}]}),
        ("/v1/completions", {"prompt": "hi there"}),
    ],
)
def test_a_streams_start_and_first_token_leave_in_one_write(
    decode: int, path: str, body: dict[str, object]
) -> None:
    body = {"model": "sim", "max_tokens": 6, "stream": True, **body}
    chunks = _chunks(decode, path, body)
    first = [json.loads(e.removeprefix("data: ")) for e in _events(chunks[0])]
    if path == "/v1/chat/completions":  # the start (the role), then the first token
        assert len(first) == 2, chunks[0]
        assert first[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert first[1]["choices"][0]["delta"]["content"]
        assert first[0]["id"] == first[1]["id"]
    else:  # a completion's stream has no start event: the first token alone
        assert len(first) == 1, chunks[0]
        assert first[0]["choices"][0]["text"]
    # then one chunk per token (the other five), and the end (finish, [DONE]) in one chunk
    assert [len(_events(c)) for c in chunks[1:-1]] == [1] * 5, chunks
    assert _events(chunks[-1])[-1] == "data: [DONE]"
