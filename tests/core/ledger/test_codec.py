"""The one codec: typed records to JSON-ready values and back."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import pytest

from servelab.core.ledger.codec import decode, encode, finite
from servelab.errors import RecordError, StoreError


class Outcome(StrEnum):
    OK = "ok"
    STALLED = "stalled"


@dataclass(frozen=True, slots=True)
class Row:
    outcome: Outcome
    ratio: float
    ci: tuple[float, float] | None = None
    repeats: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    note: str | None = None


def test_a_record_round_trips_through_json_text() -> None:
    row = Row(Outcome.STALLED, 1.128, (1.05, 1.2), {"64": (10.0, 11.5)}, "x")
    doc = encode(row)
    assert doc == {"outcome": "stalled", "ratio": 1.128, "ci": [1.05, 1.2],
                   "repeats": {"64": [10.0, 11.5]}, "note": "x"}  # fmt: skip
    again = decode(Row, json.loads(json.dumps(doc)))
    assert again == row
    assert type(again.outcome) is Outcome
    assert decode(Row, json.dumps(doc)) == row


def test_non_finite_floats_are_stored_as_null() -> None:
    doc = encode(Row(Outcome.OK, math.nan, (-math.inf, math.inf)))
    assert doc["ratio"] is None and doc["ci"] == [None, None]
    json.dumps(doc, allow_nan=False)  # strict JSON: a browser's JSON.parse reads it
    assert finite({"a": [1.0, math.nan]}) == {"a": [1.0, None]}


def test_unknown_keys_are_ignored_and_defaults_fill_missing_ones() -> None:
    row = decode(Row, {"outcome": "ok", "ratio": 2, "added_later": True})
    assert row == Row(Outcome.OK, 2.0)


def test_a_misfit_names_the_field() -> None:
    with pytest.raises(RecordError, match="outcome") as caught:
        decode(Row, {"outcome": "maybe", "ratio": 1.0})
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, ValueError)
    with pytest.raises(RecordError):
        decode(Row, "{not json")
