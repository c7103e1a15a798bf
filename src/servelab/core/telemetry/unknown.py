"""Why a run-telemetry rule could not judge: a code (stored), its detail (a source's own reason,
the decodes that did not answer), worded in ``report/`` (pure).

Until the code, a rule's reading stored an English ``reason`` and the report compared its words
(``startswith("too few ")``). :func:`upgrade_evidence` reads such a stored reading into today's
shape (``why`` + ``detail``); a sentence it does not recognise is kept as the detail of
:attr:`Unknown.SOURCE_SILENT`, what every other reason was: a source's own words.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

__all__ = ["TOO_SHORT", "Unknown", "upgrade_evidence"]


class Unknown(StrEnum):
    """Why a rule's reading is unknown (stored: values unchanged)."""

    #: the source (an engine's or the router's metrics) did not answer; detail: its own reason
    SOURCE_SILENT = "source-silent"
    #: the engine exposes no queue gauge to read a saturation from
    NO_QUEUE_GAUGE = "no-queue-gauge"
    #: too few samples in the failing window or the baseline
    TOO_FEW_SAMPLES = "too-few-samples"
    #: some decodes' metrics did not answer; detail: their names, comma separated
    DECODES_SILENT = "decodes-silent"
    #: no decode was watched
    NO_DECODE = "no-decode"
    #: the client did not count all the traffic in the window
    CLIENT_INCOMPLETE = "client-incomplete"
    #: the decodes counted too few tokens to compare with the client
    TOO_FEW_TOKENS = "too-few-tokens"


#: The codes that mean the run was too short to judge (not judged, not a warning).
TOO_SHORT = frozenset({Unknown.TOO_FEW_SAMPLES, Unknown.TOO_FEW_TOKENS})

#: An older reading's exact sentence → its code.
_SENTENCES = {
    "did not answer": Unknown.SOURCE_SILENT,
    "no queue gauge": Unknown.NO_QUEUE_GAUGE,
    "too few samples in the failing window or the baseline": Unknown.TOO_FEW_SAMPLES,
    "no decode": Unknown.NO_DECODE,
    "the client did not count all the traffic in the window": Unknown.CLIENT_INCOMPLETE,
}
_DECODES_SILENT = "decode(s) did not answer: "


def _code_of(sentence: str) -> tuple[Unknown, str | None]:
    if sentence in _SENTENCES:
        return _SENTENCES[sentence], None
    if sentence.startswith(_DECODES_SILENT):
        return Unknown.DECODES_SILENT, sentence.removeprefix(_DECODES_SILENT)
    if sentence.startswith("fewer than ") and sentence.endswith(" tokens counted by the decodes"):
        return Unknown.TOO_FEW_TOKENS, None
    return Unknown.SOURCE_SILENT, sentence


def upgrade_evidence(doc: Any) -> Any:
    """A stored rule reading of any age → today's JSON: an English ``reason`` becomes ``why``
    (and ``detail``); anything else is left as it is."""
    if not isinstance(doc, Mapping) or "reason" not in doc or "why" in doc:
        return doc
    out = {k: v for k, v in doc.items() if k != "reason"}
    if isinstance(doc["reason"], str):
        out["why"], out["detail"] = _code_of(doc["reason"])
    return out
