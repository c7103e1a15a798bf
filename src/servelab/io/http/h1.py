"""A sans-I/O HTTP/1.1 response parser: bytes in, response head and body bytes out.

The streaming client (:mod:`servelab.io.http.stream`) feeds it every read as it arrives;
:meth:`ResponseParser.feed` returns the body bytes that read carried, the transfer framing
(``Transfer-Encoding: chunked``, ``Content-Length`` or read-until-close) removed, so the caller can
stamp them with the read's time. The head (status, headers) is available once
:attr:`ResponseParser.head_done`; :attr:`ResponseParser.done` is set at the end of the body.
Informational (1xx) answers are skipped. Framing errors raise :class:`ProtocolError` with the phase
(``"head"`` or ``"body"``) they happened in. No I/O, no clock: tested at every split point.
"""

from __future__ import annotations

from servelab.errors import ProtocolError

__all__ = ["ResponseParser", "request_head"]

_HEAD_MAX = 64 * 1024
_LINE_MAX = 4096

# body framing states
_HEAD, _SIZE, _DATA, _DATA_END, _TRAILER, _LENGTH, _EOF, _DONE = range(8)


def request_head(
    method: str, target: str, host: str, headers: dict[str, str], length: int
) -> bytes:
    """The head of a request with a ``Content-Length`` body of ``length`` bytes."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", f"Content-Length: {length}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ResponseParser:
    """One response at a time; :meth:`reset` before the next one on the same connection."""

    __slots__ = (
        "_buf",
        "_left",
        "_state",
        "head_done",
        "headers",
        "keep_alive",
        "reason",
        "status",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._buf = b""
        self._state = _HEAD
        self._left = 0
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.keep_alive = True

    @property
    def done(self) -> bool:
        """True once the whole body arrived."""
        return self._state == _DONE

    @property
    def until_close(self) -> bool:
        """True when the body ends only when the server closes the connection."""
        return self._state == _EOF

    def feed(self, data: bytes) -> bytes:
        """Parse one read; return the body bytes it carried (b"" for none).

        Bytes after the end of the response are an error (a server may not answer unasked).
        """
        state = self._state
        if state == _DATA and self._buf == b"" and len(data) < self._left:
            self._left -= len(data)  # the common case: a read inside one chunk
            return data
        if state == _SIZE and not self._buf:
            whole = self._whole_chunk(data)
            if whole is not None:
                return whole
        if self._buf:
            data, self._buf = self._buf + data, b""
        if state == _HEAD:
            data = self._head(data)
            if not self.head_done:
                return b""
        if self._state == _EOF:
            return data
        if self._state == _LENGTH:
            return self._length(data)
        return self._chunked(data)

    def eof(self) -> None:
        """The server closed the connection: fine only after (or as the end of) the body."""
        if self._state == _EOF:
            self._state = _DONE
        elif self._state != _DONE:
            phase = "body" if self.head_done else "head"
            raise ProtocolError(phase, f"connection closed before the response {phase} ended")

    # -------------------------------------------------------------------------------- head
    def _head(self, data: bytes) -> bytes:
        while True:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                if len(data) > _HEAD_MAX:
                    raise ProtocolError("head", "response head too long")
                self._buf = data
                return b""
            self._parse_head(data[:end])
            data = data[end + 4 :]
            if self.status >= 200:
                break
            self.headers = {}  # 1xx: an interim answer, the real one follows
        self.head_done = True
        self._frame()
        return data

    def _parse_head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code, _, self.reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not (
            code.isascii() and code.isdigit() and len(code) == 3
        ):
            raise ProtocolError("head", f"bad status line: {lines[0][:100]!r}")
        self.status = int(code)
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError("head", f"bad header line: {line[:100]!r}")
            key, value = name.lower(), value.strip()
            self.headers[key] = f"{self.headers[key]}, {value}" if key in self.headers else value
        connection = self.headers.get("connection", "").lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in connection
        if version == "HTTP/1.0" and "keep-alive" in connection:
            self.keep_alive = True

    def _frame(self) -> None:
        if self.status in (204, 304):
            self._state = _DONE
        elif "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._state = _SIZE
        elif "content-length" in self.headers:
            text = self.headers["content-length"]
            if not (text.isascii() and text.isdigit()):  # latin-1 ``²`` is a str digit
                raise ProtocolError("head", f"bad Content-Length: {text[:40]!r}")
            self._left = int(text)
            self._state = _LENGTH if self._left else _DONE
        else:
            self._state = _EOF
            self.keep_alive = False

    # -------------------------------------------------------------------------------- body
    def _length(self, data: bytes) -> bytes:
        if len(data) < self._left:
            self._left -= len(data)
            return data
        if len(data) > self._left:
            raise ProtocolError("body", "bytes after the end of the response")
        self._left = 0
        self._state = _DONE
        return data

    def _chunked(self, data: bytes) -> bytes:
        out: list[bytes] = []
        pos, size = 0, len(data)
        while pos < size:
            state = self._state
            if state == _DATA:
                take = min(self._left, size - pos)
                out.append(data[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = _DATA_END
            elif state == _DONE:
                raise ProtocolError("body", "bytes after the end of the response")
            else:
                end = data.find(b"\r\n", pos)
                if end < 0:
                    self._keep(data[pos:])
                    break
                self._framing_line(data[pos:end])
                pos = end + 2
        return out[0] if len(out) == 1 else b"".join(out)

    def _whole_chunk(self, data: bytes) -> bytes | None:
        """The common case, one read carrying exactly one or more whole data chunks (not the
        last, empty one): their data; else None (nothing consumed)."""
        end = data.find(b"\r\n")
        if end < 1 or data[-2:] != b"\r\n" or not data[:end].isalnum():
            return None
        try:
            size = int(data[:end], 16)
        except ValueError:
            return None
        if size and len(data) == end + size + 4:
            return data[end + 2 : -2]
        return self._whole_chunks(data) if size else None

    @staticmethod
    def _whole_chunks(data: bytes) -> bytes | None:
        out: list[bytes] = []
        pos, total = 0, len(data)
        while pos < total:
            end = data.find(b"\r\n", pos)
            line = data[pos:end]
            if end < 0 or not line or not line.isalnum():
                return None
            try:
                size = int(line, 16)
            except ValueError:
                return None
            stop = end + 2 + size
            if not size or data[stop : stop + 2] != b"\r\n":
                return None
            out.append(data[end + 2 : stop])
            pos = stop + 2
        return b"".join(out)

    def _keep(self, rest: bytes) -> None:
        if len(rest) > _LINE_MAX:
            raise ProtocolError("body", "chunk framing line too long")
        self._buf = rest

    def _framing_line(self, line: bytes) -> None:
        state = self._state
        if state == _DATA_END:
            if line:
                raise ProtocolError("body", "chunk data not followed by CRLF")
            self._state = _SIZE
        elif state == _SIZE:
            text = line.split(b";", 1)[0].strip()
            try:
                self._left = int(text, 16)
            except ValueError:
                raise ProtocolError("body", f"bad chunk size: {text[:20]!r}") from None
            if self._left < 0 or text[:1] in (b"-", b"+"):
                raise ProtocolError("body", f"bad chunk size: {text[:20]!r}")
            self._state = _DATA if self._left else _TRAILER
        elif not line:  # _TRAILER: the blank line ends the response
            self._state = _DONE
