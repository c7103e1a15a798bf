"""A ``--json`` document's text, the one way every command prints one. Pure: returns str, no I/O.

Apart from :mod:`servelab.report.text` (rich) so that the failure boundary every process loads
(:mod:`servelab.cli.boundary`) imports neither rich nor pydantic.
"""

from __future__ import annotations

import json

from servelab.core.ledger.jsonvalues import finite

__all__ = ["json_text"]


def json_text(doc: object) -> str:
    """A ``--json`` document (``doc``: JSON-ready values) as the text a command prints: strict
    JSON, indented; a number that is not finite (the std of one run, an interval without bounds)
    is ``null``, a value JSON has no form for its ``str``. Each feature's ``--json`` builder
    renders its typed contract (the codec's encoding plus words) and returns this text, so no
    JSON dict crosses from report/ to cli/."""
    return json.dumps(finite(doc), indent=2, default=str, allow_nan=False) + "\n"
