"""The simulated workers' HTTP server log: quiet about the router's HTTP/2 probe.

At start-up the router probes every worker twice at once (sglang-router 0.3.2 and smg, their
``detect_connection_mode`` workflow step: an HTTP ``GET /health`` and a gRPC health check). The
gRPC probe opens with the HTTP/2 connection preface (``PRI * HTTP/2.0``), which an HTTP/1.1
server refuses: aiohttp logs it as an error with a traceback (``BadHttpMessage: Pause on
PRI/Upgrade``), one per worker per router start. A real SGLang server (uvicorn) answers it 400
with a one-line warning; the simulator answers it 400 and logs it at debug level, so its log
keeps tracebacks for real failures. Every other bad request is logged as aiohttp logs it.
"""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import BadHttpMessage

__all__ = ["is_http2_preface", "server_logger"]

#: The logger the workers' HTTP servers log to (``aiohttp.server``'s child).
_NAME = "aiohttp.server.servelab-sim"


def is_http2_preface(exc: BaseException | None) -> bool:
    """Whether ``exc`` is the HTTP/1.1 parser refusing an HTTP/2 connection preface."""
    return isinstance(exc, BadHttpMessage) and "PRI/Upgrade" in str(exc)


class _QuietPreface(logging.Filter):
    """An HTTP/2 preface's error record becomes one debug line without its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and is_http2_preface(record.exc_info[1]):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            record.msg, record.args = "an HTTP/2 preface (the router's gRPC probe): 400", ()
            record.exc_info, record.exc_text = None, None
            return logging.getLogger(_NAME).isEnabledFor(logging.DEBUG)
        return True


def server_logger() -> logging.Logger:
    """The workers' HTTP server logger (its filter added once, when first asked for)."""
    logger = logging.getLogger(_NAME)
    if not any(isinstance(f, _QuietPreface) for f in logger.filters):
        logger.addFilter(_QuietPreface())
    return logger
