"""A row of a ledger table as it is stored, of any age (pure): what ``ledger export --format
jsonl`` and ``csv`` write as it is.

The export streams every table's rows without reading them as their records: a row no record of
today reads (an older shape, a row of a table no record type has) is exported the same. So its
values stay the stored JSON, wrapped once here so that no function of report/ takes a JSON dict.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.ledger.codec import JsonObject

__all__ = ["RawRow"]


@dataclass(frozen=True, slots=True)
class RawRow:
    """One row as stored: its columns by name, its JSON columns decoded, a per-request record's
    ``record`` as its JSON (``Ledger.iter_rows``)."""

    #: JSON: the row as stored, of any age (read as no record type: it is exported as it is)
    values: JsonObject
