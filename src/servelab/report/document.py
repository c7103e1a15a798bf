"""A ``--json`` document as the text a command prints (pure): the one place it becomes text.

Each feature's ``--json`` builder in report/ renders its typed contract (the codec's encoding
plus words) and returns this text, so no JSON dict crosses from report/ to cli/: the command
prints what it is given. Strict JSON, indented: a number that is not finite (the std of one run,
an interval without bounds) is ``null``; a value JSON has no form for is its ``str``.
"""

from __future__ import annotations

import json

from servelab.core.ledger.codec import finite

__all__ = ["json_text"]


def json_text(doc: object) -> str:
    """``doc`` (JSON-ready values) as the indented strict JSON text of a ``--json`` document."""
    return json.dumps(finite(doc), indent=2, default=str, allow_nan=False) + "\n"
