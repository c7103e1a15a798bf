"""The redaction policy (:mod:`servelab.core.redaction`) as the pydantic serializer types the
contracts are annotated with: what the codec encodes (``--json``, the ledger, ``ledger export``)
is masked, while the records keep the real values for the requests, comparisons and parsers.

Apart from :mod:`servelab.core.redaction` so that what redacts text alone (every error line, the
simulated engines, ``servelab --help``) does not import pydantic (about 40 ms of CPU a process:
``benchmarks/cli_startup.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainSerializer, SerializerFunctionWrapHandler, model_serializer

from servelab.core.redaction import mask_fields, redact, redact_headers, stored_url

__all__ = ["StoredCommand", "StoredHeaders", "StoredText", "StoredUrl", "masked_serializer"]

#: Request headers as a contract stores and shows them (``bench``/``soak --header``): encoded with
#: every secret-looking value redacted; the requests carry the real values.
StoredHeaders = Annotated[
    tuple[tuple[str, str], ...],
    PlainSerializer(lambda headers: [list(h) for h in redact_headers(headers)]),
]

#: A URL as a contract stores and shows it (``--url``): encoded with its password and its
#: secret-named query parameters redacted (:func:`~servelab.core.redaction.stored_url`); the
#: requests use the real one.
StoredUrl = Annotated[str, PlainSerializer(stored_url)]

#: A command's words as a contract stores and shows them (``curl -X DELETE ROUTER/workers/ID``):
#: encoded with each word's URL password and secret-named query parameters redacted.
StoredCommand = Annotated[
    tuple[str, ...], PlainSerializer(lambda words: [stored_url(word) for word in words])
]

#: Text quoted from elsewhere as a contract stores and shows it (an engine's answer: a health
#: body, a model name it reports): encoded with what :func:`redact` finds in it masked; the
#: comparisons and parsers read the real text.
StoredText = Annotated[str, PlainSerializer(lambda text: redact(text))]


def masked_serializer(name_field: str, *fields: str) -> Any:
    """A wrap serializer for a record (a dataclass) about a knob: its encoding (``--json``, the
    ledger) with ``fields`` masked when the knob named by ``name_field`` is secret-looking
    (:func:`~servelab.core.redaction.mask_fields`). Put in the class body:
    ``_masked = masked_serializer("name", "value")``."""

    def serialize(self: Any, handler: SerializerFunctionWrapHandler) -> Any:
        return mask_fields(handler(self), getattr(self, name_field), fields)

    return model_serializer(mode="wrap")(serialize)
