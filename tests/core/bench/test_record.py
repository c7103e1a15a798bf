"""A bench run's row reads and writes its config, summary and records as they were stored, of
any age (``core/bench/shapes.py`` names their keys; ``Stored`` keeps them as they are)."""

from __future__ import annotations

import json

import pytest

import servelab.core.bench.shapes as shapes
from servelab.core.bench.record import BenchRunRecord
from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.jsonvalues import finite
from servelab.errors import RecordError
from tests.support.old_rows import BENCH_SUMMARY_BEFORE_CONTRACT

#: A config of an older servelab: keys today's BenchConfig no longer has, a null where today
#: has a number, keys out of today's order.
OLD_CONFIG = ('{"url":"http://127.0.0.1:30001","repeat":null,"concurrencies":[64,80],'
              '"warmup_requests":2,"knobs":{"K":"512"},"deadline_s":null}')  # fmt: skip
#: Per-request records of two ages: today's keys, and one written before most of them.
OLD_RECORDS = ['{"index":0,"scheduled_ns":5,"status":200,"event_ns":[7,9],"session":null}',
               '{"index":1,"ttft_ns":12,"ok":true}']  # fmt: skip


def test_public_api_is_explicit() -> None:
    for name in shapes.__all__:
        assert hasattr(shapes, name), name


def _row() -> dict[str, object]:
    return {"id": 3, "at": "2026-01-01T00:00:00Z", "label": None, "n_records": 2,
            "config": json.loads(OLD_CONFIG), "summary": json.loads(BENCH_SUMMARY_BEFORE_CONTRACT),
            "records": [json.loads(r) for r in OLD_RECORDS]}  # fmt: skip


def test_an_older_row_reads_and_is_written_back_as_it_was_stored() -> None:
    run = decode(BenchRunRecord, _row())
    assert run.config.get("repeat") is None and run.config.get("url") == "http://127.0.0.1:30001"
    doc = encode(run)
    assert json.dumps(doc["config"], separators=(",", ":")) == OLD_CONFIG  # keys, order, values
    assert doc["summary"] == finite(json.loads(BENCH_SUMMARY_BEFORE_CONTRACT))  # NaN: null
    assert list(doc["summary"]) == list(json.loads(BENCH_SUMMARY_BEFORE_CONTRACT))
    assert [json.dumps(r, separators=(",", ":")) for r in doc["records"]] == OLD_RECORDS
    assert encode(decode(BenchRunRecord, json.loads(json.dumps(doc)))) == doc


@pytest.mark.parametrize("field", ["config", "summary"])
def test_a_part_that_is_no_json_object_is_a_record_error_naming_it(field: str) -> None:
    with pytest.raises(RecordError, match=field):
        decode(BenchRunRecord, {**_row(), field: [1, 2]})
