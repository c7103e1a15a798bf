"""The one codec: typed records to JSON-ready values and back."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

import pytest
from pydantic import Field, computed_field

from servelab.core.ledger.codec import OMITTED_IF_NONE, decode, encode
from servelab.core.ledger.jsonvalues import finite
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


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float
    estimate: float | None = None


def test_a_non_finite_float_reads_back_as_nan_and_an_optional_one_as_none() -> None:
    doc = encode(Interval(-math.inf, math.nan))
    assert doc == {"low": None, "high": None, "estimate": None}
    again = decode(Interval, doc)
    assert math.isnan(again.low) and math.isnan(again.high) and again.estimate is None
    nested = decode(tuple[Interval, ...], [{"low": None, "high": 2, "estimate": None}])
    assert math.isnan(nested[0].low) and nested[0].high == 2.0
    assert decode(Row, {"outcome": "ok", "ratio": None, "ci": [None, 1.5]}).ci is not None


@dataclass(frozen=True, slots=True)
class Event:
    from_value: Annotated[str | None, Field(alias="from")]
    pruned_at: Annotated[str | None, OMITTED_IF_NONE] = None
    levels: Mapping[int, float] = field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> float:
        return sum(self.levels.values())


def test_aliases_omitted_fields_int_keys_and_computed_fields() -> None:
    event = Event("512", None, {64: 1.5, 80: 2.0})
    doc = encode(event)
    assert doc == {"from": "512", "levels": {"64": 1.5, "80": 2.0}, "total": 3.5}
    assert decode(Event, doc) == event
    assert encode(Event(None, "t"))["pruned_at"] == "t"
