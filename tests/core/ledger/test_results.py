"""The soak's typed failed requests and determinism probe: the JSON shape the soak always wrote."""

from __future__ import annotations

import pytest

from servelab.core.ledger.results import Determinism, FailedRequest, SoakDocument


@pytest.mark.parametrize(
    ("det", "doc"),
    [
        (Determinism(), {}),  # not checked
        (Determinism(reference_ok=False), {"reference_ok": False}),
        (
            Determinism(reference_ok=True, sessions_ended_first=True),
            {"reference_ok": True, "under_load_ok": None},
        ),
        (
            Determinism(reference_ok=True, under_load_ok=False, concurrency=3),
            {"reference_ok": True, "under_load_ok": False, "concurrency": 3},
        ),
        (
            Determinism(reference_ok=True, under_load_ok=True, concurrency=4, same_text=True),
            {"reference_ok": True, "under_load_ok": True, "concurrency": 4, "same_text": True},
        ),
    ],
)
def test_determinism_writes_only_what_was_measured(
    det: Determinism, doc: dict[str, object]
) -> None:
    assert det.to_json() == doc
    assert list(det.to_json()) == list(doc)  # key order too
    assert Determinism.from_json(doc) == det


def test_a_failed_request_keeps_its_keys_and_order() -> None:
    failed = FailedRequest(2, 5, 503, "http 503", "overloaded")
    doc = {"session": 2, "round": 5, "status": 503, "error": "http 503", "detail": "overloaded"}
    assert failed.to_json() == doc and list(failed.to_json()) == list(doc)
    assert FailedRequest.from_json(doc) == failed
    assert FailedRequest.from_json({"session": 1}) == FailedRequest(1, 0, None, None, "")


def test_a_soak_document_reads_its_errors_and_determinism_typed() -> None:
    doc = SoakDocument.from_json(
        {"errors": [{"session": 0, "round": 1, "status": None, "error": "connection error"}],
         "determinism": {"reference_ok": True, "under_load_ok": None}}
    )  # fmt: skip
    assert doc.errors == (FailedRequest(0, 1, None, "connection error"),)
    assert doc.determinism == Determinism(reference_ok=True, sessions_ended_first=True)
    assert SoakDocument.from_json({}).determinism is None
    assert SoakDocument().to_json()["determinism"] is None
