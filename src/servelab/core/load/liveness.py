"""What keeps a stream alive for the idle timeout (sans-I/O): the bytes of an event's ``data:``
line, not any byte. An engine that sends only SSE comments (``: keepalive``), blank lines or
other fields (``event:``, ``id:``, ``retry:``) sends nothing a client can use: those bytes must
not hold off ``--idle-timeout`` forever. :class:`DataLines` follows the lines of one body across
reads (a line and its field name can be split anywhere) and says, per read, whether the read
carried any byte of a ``data`` line."""

from __future__ import annotations

import re

__all__ = ["DataLines"]

_EOL = re.compile(rb"\r\n|\r|\n")
_DATA = b"data:"
_UNKNOWN, _IS_DATA, _OTHER = 0, 1, 2


class DataLines:
    """The line state of one SSE body, read by read."""

    __slots__ = ("_kind", "_start")

    def __init__(self) -> None:
        self._kind = _UNKNOWN
        self._start = b""  # the line's first bytes, while its field is not known yet

    def feed(self, data: bytes) -> bool:
        """True when ``data`` holds a byte of a ``data:`` line (what counts as a sign of life)."""
        fresh = self._kind == _UNKNOWN and not self._start
        if fresh and data.startswith(_DATA) and data.endswith(b"\n"):
            return True  # the common read: whole events, each a data: line
        alive = False
        for i, part in enumerate(_EOL.split(data)):
            if i:  # a line ended: the next one starts
                self._kind, self._start = _UNKNOWN, b""
            if part and self._extend(part):
                alive = True
        return alive

    def _extend(self, part: bytes) -> bool:
        if self._kind == _UNKNOWN:
            start = self._start + part[: len(_DATA) - len(self._start)]
            if start.startswith(_DATA):
                self._kind, self._start = _IS_DATA, b""
            elif _DATA.startswith(start):  # "d", "da", ... "data": not known yet
                self._start = start
            else:
                self._kind, self._start = _OTHER, b""
        return self._kind == _IS_DATA
