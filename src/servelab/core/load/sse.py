"""A sans-I/O Server-Sent Events decoder (WHATWG HTML "event stream" interpretation).

The async wrapper only pumps bytes in: ``feed(data, t_ns)`` with the ``perf_counter_ns()`` of the
read that returned ``data``; it returns the events completed by that read, each stamped with that
time.
Lines may end in LF, CR or CRLF, and a CRLF may be split across two reads. Events split across reads
and several events in one read are both handled. ``flush()`` ends the stream: an event without its
closing blank line is returned with ``complete=False`` (the spec drops it; a client wants to know).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Event", "SSEDecoder"]


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched SSE event: its joined ``data`` lines, ``event`` type and decode time."""

    data: str
    t_ns: int
    event: str = "message"
    id: str | None = None
    complete: bool = True


class SSEDecoder:
    """Incremental decoder: bytes in, :class:`Event` out. Keeps only the unfinished line."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_skip_lf")

    def __init__(self) -> None:
        self._buf = b""
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def whole(self, data: bytes) -> list[bytes] | None:
        """The common read: when the decoder holds nothing and ``data`` is one or more whole
        single-line ``data: ...`` events (LF endings), their data (undecoded bytes), else None.

        ``feed(data, t)`` would return exactly these events, their ``data`` the bytes decoded
        (UTF-8, errors replaced), of type ``"message"``, with the last id, and leave the decoder
        as idle as it was; a caller that only needs the data may take it here, no
        :class:`Event` made.
        """
        if (
            data[:6] != b"data: "
            or data[-2:] != b"\n\n"
            or self._buf
            or self._data
            or self._event
            or self._skip_lf
            or b"\r" in data
        ):
            return None
        if data.count(b"\n") == 2:
            return [data[6:-2]]
        parts = data[:-2].split(b"\n\n")
        for part in parts:
            if part[:6] != b"data: " or b"\n" in part:
                return None
        return [part[6:] for part in parts]

    def feed(self, data: bytes, t_ns: int) -> list[Event]:
        """Decode one read; return the events it completed, all stamped ``t_ns``."""
        payloads = self.whole(data)
        if payloads is not None:  # the common case: whole single-line events
            ident = self._id
            return [Event(p.decode("utf-8", "replace"), t_ns, "message", ident) for p in payloads]
        if self._skip_lf and data[:1] == b"\n":
            data = data[1:]
        self._skip_lf = False
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            self._skip_lf = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        events: list[Event] = []
        for line in lines:
            event = self._line(line, t_ns)
            if event is not None:
                events.append(event)
        return events

    def flush(self, t_ns: int) -> list[Event]:
        """End of stream: return an unterminated event (``complete=False``), if any."""
        if self._buf:
            self._line(self._buf, t_ns)
            self._buf = b""
        if not self._data:
            return []
        event = Event("\n".join(self._data), t_ns, self._event or "message", self._id, False)
        self._data = []
        return [event]

    def _line(self, line: bytes, t_ns: int) -> Event | None:
        if not line:
            return self._dispatch(t_ns)
        if line[:1] == b":":
            return None
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        self._field(name, value.decode("utf-8", "replace"))
        return None

    def _field(self, name: bytes, value: str) -> None:
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        elif name == b"id" and "\0" not in value:
            self._id = value

    def _dispatch(self, t_ns: int) -> Event | None:
        if not self._data:
            self._event = ""
            return None
        event = Event("\n".join(self._data), t_ns, self._event or "message", self._id)
        self._data = []
        self._event = ""
        return event
