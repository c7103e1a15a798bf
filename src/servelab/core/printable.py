"""Text another program sent (a router's worker list, an engine's report), as servelab may store
and show it: every control character escaped, so none reaches a terminal or the ledger as it
came (an ``ESC [`` sequence would recolour or retitle the terminal, a ``NUL`` cut a C string, a
newline forge a line of a table or of a TOML spec, a right-to-left override reverse what
follows).

:func:`printable` is the one sanitizer of such text: C0 and C1 controls, ``DEL``, the line and
paragraph separators and the bidirectional overrides become ``\\xNN``/``\\uNNNN`` escapes (a
reader sees what was sent); a backslash the text holds is kept. :func:`printable_lines` does the
same to text quoted as lines (a log's tail), keeping its line ends and tabs (a ``CR LF`` read as
a line end; a lone ``CR``, which would write over a line, escaped). Secrets are the redaction
policy's (:mod:`servelab.core.redaction`), applied where the text is quoted.
"""

from __future__ import annotations

import re

__all__ = ["printable", "printable_lines"]

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_LINES = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)  # as _UNSAFE, but \t and \n


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped (see the module doc)."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """``text`` with every control character but the line end and the tab escaped."""
    return _UNSAFE_IN_LINES.sub(_escape, text.replace("\r\n", "\n"))
