"""A hostile engine, run as its own process: ``python -m tests.support.hostile_engine PORT``.

Every string it reports holds a secret of a well-known shape (what a careless engine build or a
hostile one may put there): its ``/health`` body (``{"token": "sk-proj-...", "note":
"ghp_..."}``), the ``served_model_name``, ``model_path`` and ``version`` of its ``/server_info``
(and ``/get_server_info``), and the model id of its ``/v1/models``. Every other path is a 404.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["HEALTH_SECRETS", "INFO_SECRETS", "SECRETS"]

#: The secrets of its ``/health`` body.
HEALTH_SECRETS = ("sk-proj-AAAAhostile0123456789abcd", "ghp_DDDDhostile0123456789abcdef")
#: The secrets of its ``/server_info`` and ``/v1/models`` strings.
INFO_SECRETS = (
    "ghp_CCCChostile0123456789abcdef",
    "hf_MMMMhostile0123456789abcd",
    "sk-VVVVhostile0123456789abcd",
)
SECRETS = HEALTH_SECRETS + INFO_SECRETS


def _body(path: str) -> object | None:
    token, note = HEALTH_SECRETS
    served, model, version = INFO_SECRETS
    if path == "/health":
        return {"token": token, "note": note}
    if path in ("/server_info", "/get_server_info"):
        return {"served_model_name": f"m {served}", "model_path": None,
                "version": f"0.5 {version}", "page_size": 1}  # fmt: skip
    if path == "/v1/models":
        return {"object": "list", "data": [{"id": f"m {model}", "object": "model"}]}
    return None


def main() -> None:
    port = int(sys.argv[1])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = _body(self.path.split("?")[0])
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
