"""Text another program sent (a router's worker list, an engine's report), as servelab may store
and show it: every control character escaped, so none reaches a terminal or the ledger as it
came (an ``ESC [`` sequence would recolour or retitle the terminal, a ``NUL`` cut a C string, a
newline forge a line of a table or of a TOML spec, a right-to-left override reverse what
follows).

:func:`printable` is the one sanitizer of such text: C0 and C1 controls, ``DEL``, the line and
paragraph separators and the bidirectional overrides become ``\\xNN``/``\\uNNNN`` escapes (a
reader sees what was sent); a backslash the text holds is kept. Secrets are the redaction
policy's (:mod:`servelab.core.redaction`), applied where the text is quoted.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character escaped (see the module doc)."""
    return _UNSAFE.sub(_escape, text)
