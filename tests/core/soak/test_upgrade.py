"""Soak rows an older servelab wrote still read, typed: real rows (``data/older_soaks.json``:
written by servelab before the soak's result was one type, its findings worded, its observations
``{"id", "subject", "healthy", "data"}``) and the smaller shapes older rows took."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import servelab.core.soak.upgrade as upgrade_mod
from servelab.core.ledger.codec import decode, encode
from servelab.core.soak.evidence import Probe
from servelab.core.soak.observation import ProbeResult
from servelab.core.soak.record import read_soak_run
from servelab.core.soak.result import Determinism, SoakResult
from servelab.core.soak.upgrade import read_soak_result
from tests.support.soakresult import every_kind_result

OLDER = json.loads((Path(__file__).parent / "data" / "older_soaks.json").read_text())
AT = "2026-01-01T00:00:00.000Z"


def _rows() -> list[dict[str, Any]]:
    """The fixture's rows as the ledger hands them over (JSON columns decoded)."""
    return [
        {**r, "config": json.loads(r["config"]), "result": json.loads(r["result"]),
         "findings": [json.loads(f) for f in r["findings"]], "ok": bool(r["ok"])}
        for r in OLDER["rows"]
    ]  # fmt: skip


def _documents() -> list[dict[str, Any]]:
    return [*(r["result"] for r in _rows()), *OLDER["documents"].values()]


def test_public_api_is_explicit() -> None:
    for name in upgrade_mod.__all__:
        assert hasattr(upgrade_mod, name), name


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"row{r['id']}")
def test_a_real_older_row_reads_typed(row: dict[str, Any]) -> None:
    soak = read_soak_run(row)
    old = row["result"]
    assert (soak.id, soak.at, soak.ok) == (row["id"], row["at"], False)
    assert soak.result.config.knobs == row["config"]["knobs"]
    assert [f.layer for f in soak.result.findings] == [f["layer"] for f in row["findings"]]
    assert len(soak.result.localizations) == len(old["localizations"])
    assert soak.result.sessions.count == old["sessions"]["count"]
    assert len(soak.result.stalls) == len(old["stalls"]) and soak.result.telemetry is not None


@pytest.mark.parametrize("doc", _documents(), ids=lambda d: str(len(d["observations"])))
def test_every_older_observation_and_finding_keeps_its_ids(doc: dict[str, Any]) -> None:
    result = read_soak_result(doc)
    assert [(o.id, o.subject, o.healthy) for o in result.observations] == [
        (o["id"], o["subject"], o["healthy"]) for o in doc["observations"]
    ]
    for new, old in zip(result.findings, doc["findings"], strict=True):
        items = [e for e in old["evidence"] if e["id"] != "worker"]
        assert new.supporting == tuple(e["id"] for e in items if e["supports"])
        assert new.contradicting == tuple(e["id"] for e in items if not e["supports"])
        assert (new.layer, new.confidence, new.worker) == (
            old["layer"], old["confidence"], old.get("worker")
        )  # fmt: skip
    assert result.ok is doc["ok"]
    assert encode(result.undecided) == doc["undecided"]


def test_the_findings_table_stands_in_for_a_result_without_findings() -> None:
    (row, *_) = _rows()
    del row["result"]["findings"]
    soak = read_soak_run(row)
    assert [f.layer for f in soak.result.findings] == ["client_proxy"]


def test_todays_result_goes_through_unchanged() -> None:
    stored = json.loads(json.dumps(encode(every_kind_result())))
    assert json.loads(json.dumps(encode(read_soak_result(stored)))) == stored
    assert read_soak_result(stored) == every_kind_result()
    assert decode(SoakResult, stored) == every_kind_result()  # nothing to upgrade
    for obs in stored["observations"]:  # each kind of today's, alone, as it was
        (read,) = read_soak_result({"observations": [obs]}).observations
        assert json.loads(json.dumps(encode(read))) == obs


@pytest.mark.parametrize(
    ("doc", "det"),
    [
        ({}, Determinism()),  # not checked
        (None, Determinism()),  # rows from before the probe
        ({"reference_ok": False}, Determinism(reference_ok=False)),
        (
            {"reference_ok": True, "under_load_ok": None},
            Determinism(reference_ok=True, sessions_ended_first=True),
        ),
        (
            {"reference_ok": True, "under_load_ok": False, "concurrency": 3},
            Determinism(reference_ok=True, under_load_ok=False, concurrency=3),
        ),
        (
            {"reference_ok": True, "under_load_ok": True, "concurrency": 4, "same_text": True},
            Determinism(reference_ok=True, under_load_ok=True, concurrency=4, same_text=True),
        ),
    ],
)
def test_the_older_determinism_shape_left_out_what_it_had_not_measured(
    doc: dict[str, Any] | None, det: Determinism
) -> None:
    assert read_soak_result({"determinism": doc}).determinism == det


def test_partial_rows_read_with_defaults() -> None:
    soak = read_soak_run({"id": 1, "at": AT, "ok": None, "config": {}, "result": {}})
    assert soak.ok is None and soak.result.config.knob("decode", "K") is None
    assert soak.result.findings == () and soak.result.determinism == Determinism()
    errors = {"errors": [{"session": 0, "round": 1, "status": None, "error": "connection error"}]}
    soak = read_soak_run({"id": 2, "at": AT, "ok": False, "config": {}, "result": errors})
    assert soak.result.errors[0].detail == "" and soak.result.errors[0].error == "connection error"


@pytest.mark.parametrize("part", ["findings", "observations", "localizations", "exonerated"])
def test_a_list_stored_as_a_number_reads_as_none_kept(part: str) -> None:
    """A damaged row's list that is a number reads as empty (it was a TypeError: a traceback)."""
    assert getattr(read_soak_result({part: 5}), part) == ()


def test_older_knob_values_read_as_text_and_the_config_column_fills_in() -> None:
    row = {"id": 1, "at": AT, "ok": False, "result": {},
           "config": {"sessions": 2, "knobs": {"decode/K": "512", "K": "1", "N": 7}}}  # fmt: skip
    soak = read_soak_run(row)
    assert soak.result.config.sessions == 2
    assert soak.result.config.knob("decode", "K") == "512"
    assert soak.result.config.knob("prefill", "N") == "7"


def test_an_observation_of_no_known_kind_is_left_out() -> None:
    weird = {"id": "weird.thing", "subject": "x", "data": {}}
    assert read_soak_result({"observations": [weird]}).observations == ()
    older = {"id": "http_5xx:probe.router.readiness", "subject": "router", "healthy": False,
             "data": {"role": "router", "kind": "readiness", "status": 503, "elapsed_s": 0.1,
                      "detail": "HTTP 503"}}  # fmt: skip
    (scoped,) = read_soak_result({"observations": [weird, older]}).observations
    assert isinstance(scoped, ProbeResult) and encode(scoped)["kind"] == "probe"
    assert (scoped.id, scoped.subject, scoped.healthy) == (older["id"], "router", False)
    assert scoped.probe == decode(Probe, {"role": "router", "kind": "readiness", "status": 503,
                                          "elapsed_s": 0.1, "detail": "HTTP 503",
                                          "service": "router", "ok": False})  # fmt: skip


def test_an_older_matrix_said_size_dependent_and_now_says_what_it_depends_on() -> None:
    stored = json.loads(json.dumps(encode(every_kind_result())))
    for said, now in ((True, "size"), (False, None)):
        older = json.loads(json.dumps(stored))
        for loc in older["localizations"]:
            located = loc["matrix"]["located"]
            located.pop("dependence")
            located["size_dependent"] = said
        back = read_soak_result(older)
        assert {loc.matrix.located.dependence for loc in back.localizations} == {now}
        assert all(loc.matrix.located.size_dependent is said for loc in back.localizations)


def test_a_soak_stored_before_the_conviction_rule_reads_with_no_exoneration() -> None:
    stored = json.loads(json.dumps(encode(every_kind_result())))
    assert stored["exonerated"] and stored["exonerated"][0]["standing"] == "exonerated"
    today = read_soak_result(stored)
    assert today.exonerated == every_kind_result().exonerated  # through the codec, typed
    clocks = {c.clock for loc in today.localizations for c in loc.matrix.cells}
    assert {"deadline", "undecided"} <= clocks
    older = json.loads(json.dumps(stored))
    del older["exonerated"]
    for loc in older["localizations"]:
        for cell in loc["matrix"]["cells"]:
            cell.pop("clock"), cell.pop("deadline_s")
    back = read_soak_result(older)
    assert back.exonerated == ()
    assert {c.clock for loc in back.localizations for c in loc.matrix.cells} == {"idle"}
    for row in _rows():
        assert read_soak_run(row).result.exonerated == ()
