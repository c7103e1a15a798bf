"""A hostile router, run as its own process: ``python -m tests.support.hostile_router PORT MODE
[DECODE_URL] [WORDS...]`` (the words only sit in its command line, as an engine's ``--api-key``
would).

It answers ``GET /workers`` as a router would, but with what ``MODE`` says:

- ``huge``: an endless JSON body (a worker list that never ends);
- ``many``: 300 workers;
- ``deep``: 100,000 nested lists;
- ``inject``: a worker URL holding a quote and a newline (a TOML injection), one with
  credentials and a secret in its query, one on port 99999, one whose bootstrap port is 10^30,
  and ``DECODE_URL`` (another of these, in ``self`` mode) as the one decode;
- ``bloated``: a worker whose ``/server_info``, ``/get_server_info``, ``/version`` and
  ``/v1/models`` are endless JSON bodies; ``fanout`` lists the URLs after ``MODE`` as its decode
  workers (three ``bloated`` ones) and answers as ``bloated`` does;
- ``self``: itself as the one decode worker (its command line is what ``init`` reads); its
  ``/server_info`` and ``/v1/models`` report a model and a version holding a newline, a line of
  TOML (``stop = "touch PWNED"``) and the secret.

- ``garbage``: ``{"workers": "oops"}`` (200, not a list); ``empty``: ``{"workers": []}``;
- ``escapes``: one worker whose id, URL, role and status hold an ``ESC [`` sequence, a ``NUL``
  and a newline; in these two modes ``/readiness`` and ``/health`` answer 200 (a router verify
  reads).

Otherwise its ``/v1/models`` lists ``hostile-model``; every other path is a 404.

With ``HOSTILE_PREFILL`` set (a URL) in its environment, ``inject``, ``typed`` and ``fanout``
list that URL last as a usable prefill worker (``init`` writes no spec without a prefill and a
decode).
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = "sk-PLANTEDhostile0123456789abcdef"


def _workers(port: int, mode: str, decode: str) -> object:
    listed = _listed(port, mode, decode)
    prefill = os.environ.get("HOSTILE_PREFILL")
    workers = listed["workers"]
    if prefill and mode in ("inject", "typed", "fanout") and isinstance(workers, list):
        workers.append(
            {"id": "p", "url": prefill, "worker_type": "prefill", "bootstrap_port": 45678}
        )
    return listed


def _listed(port: int, mode: str, decode: str) -> dict[str, object]:
    me = f"http://127.0.0.1:{port}"
    if mode == "many":
        return {"workers": [{"id": str(i), "url": f"http://127.0.0.1:{i + 1}",
                             "worker_type": "decode"} for i in range(300)]}  # fmt: skip
    if mode == "inject":
        return {"workers": [
            {"id": "a", "url": me + '"\nstart = "touch PWNED"\n#', "worker_type": "prefill"},
            {"id": "b", "url": f"http://admin:pw@127.0.0.1:{port}?token={SECRET}",
             "worker_type": "prefill"},
            {"id": "c", "url": "http://127.0.0.1:99999", "worker_type": "prefill"},
            {"id": "d", "url": me, "worker_type": "prefill", "bootstrap_port": 10**30},
            {"id": "e", "url": decode, "worker_type": "decode"},
        ]}  # fmt: skip
    if mode == "typed":  # URLs of the wrong JSON type
        return {"workers": [{"id": "a", "url": 8080, "worker_type": "prefill"},
                            {"id": "b", "url": ["http://127.0.0.1:1"], "worker_type": "prefill"},
                            {"id": "e", "url": decode, "worker_type": "decode"}]}  # fmt: skip
    if mode == "garbage":
        return {"workers": "oops"}
    if mode == "empty":
        return {"workers": []}
    if mode == "escapes":
        bad = "\x1b[2J\x1b]0;PWNED\x07\x00\n"
        return {"workers": [{"id": "w" + bad, "url": f"http://127.0.0.1:9{bad}",
                             "worker_type": "decode" + bad, "status": bad}]}  # fmt: skip
    if mode == "fanout":
        urls = sys.argv[3:]
        return {"workers": [{"id": u, "url": u, "worker_type": "decode"} for u in urls]}
    return {"workers": [{"id": "e", "url": me, "worker_type": "decode"}]}


#: What ``bloated`` answers without end.
_ENDLESS = ("/server_info", "/get_server_info", "/version", "/v1/models")


def main() -> None:
    port, mode = int(sys.argv[1]), sys.argv[2]
    decode = sys.argv[3] if mode in ("inject", "typed") else ""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            endless = mode in ("bloated", "fanout") and path in _ENDLESS
            if (mode == "huge" and path == "/workers") or endless:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(b'{"workers": ["')
                    for _ in range(4096):  # 4 GiB, never all read
                        self.wfile.write(b"A" * (1 << 20))
                except OSError:
                    pass
                return
            if mode == "deep" and path == "/workers":
                body = None  # 100,000 nested lists: deeper than a JSON parser goes
            elif path == "/workers":
                body = _workers(port, mode, decode)
            elif path in ("/readiness", "/health") and mode in ("garbage", "escapes"):
                body = {"status": "ok"}
            elif path == "/v1/models":
                name = "hostile-model" if mode != "self" else f'm\nstop = "touch PWNED"\n# {SECRET}'
                body = {"object": "list", "data": [{"id": name}]}
            elif path in ("/server_info", "/get_server_info", "/version") and mode == "self":
                body = {"model_path": f'/m?token={SECRET}\nstop = "touch PWNED"\n#',
                        "version": f"0.5\n[services.evil]\n# {SECRET}"}  # fmt: skip
            else:
                self.send_response(404)
                self.end_headers()
                return
            raw = json.dumps(body).encode() if body is not None else b"[" * 10**5 + b"]" * 10**5
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
