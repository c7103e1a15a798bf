"""The soak's words are rendered from codes, for a live result and a ledger row alike: a
sentence for every kind of observation, and the same sentences an older servelab stored."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from servelab.core.ledger.codec import decode, encode
from servelab.core.ledger.export import LedgerExport
from servelab.core.soak.observation import RouterHealth
from servelab.core.soak.record import SoakRunRecord, read_soak_run
from servelab.core.soak.undecided import NextProbe, Undecided, UndecidedReason
from servelab.core.soak.upgrade import read_soak_result
from servelab.core.telemetry.layers import Layer
from servelab.io.ledger.ledger import Ledger
from servelab.report.ledger import ledger_json_chunks
from servelab.report.pages import soak_markdown
from servelab.report.soak.matrix import probe_advice
from servelab.report.soak.soak import render_soak, soak_json
from servelab.report.soak.words import (
    describe_observation,
    finding_evidence,
    layer_advice,
    layer_title,
)
from tests.support.soakresult import every_kind_result

OLDER = json.loads(
    (Path(__file__).parents[2] / "core" / "soak" / "data" / "older_soaks.json").read_text()
)


def _older_documents() -> list[dict[str, Any]]:
    return [*(json.loads(r["result"]) for r in OLDER["rows"]), *OLDER["documents"].values()]


def test_every_kind_of_observation_and_every_layer_has_words() -> None:
    result = every_kind_result()
    for o in result.observations:
        assert describe_observation(o).strip(), o
    assert all(layer_title(layer) and layer_advice(layer) for layer in Layer)


@pytest.mark.parametrize("doc", _older_documents(), ids=lambda d: str(len(d["observations"])))
def test_an_older_rows_findings_read_as_the_words_it_stored(doc: dict[str, Any]) -> None:
    """The words are rendered from the upgraded codes exactly as an older servelab stored them."""
    result = read_soak_result(doc)
    for finding, old in zip(result.findings, doc["findings"], strict=True):
        assert (layer_title(finding.layer), layer_advice(finding.layer)) == (
            old["title"], old["advice"]
        )  # fmt: skip
        lines = finding_evidence(finding, result.observations)
        assert [(e.id, e.supports) for e in lines] == [
            (e["id"], e["supports"]) for e in old["evidence"]
        ]
        for line, stored in zip(lines, old["evidence"], strict=True):
            if stored["text"].startswith(f"{stored['id']}: {{"):
                # An older servelab had no words for a later localization's (scoped) facts and
                # stored their data as the text; they are worded now.
                assert ":" in line.id.split(".")[0] and line.text != stored["text"]
            else:
                assert line.text == stored["text"]


def test_a_row_renders_as_the_live_result_did(tmp_path: Path) -> None:
    result = every_kind_result()
    row = SoakRunRecord(1, "2026-01-01T00:00:00.000Z", result.ok, result)
    read = read_soak_run(json.loads(json.dumps(encode(row))))
    assert render_soak(read.result) == render_soak(result)
    assert soak_json(read.result) == soak_json(result)


def test_the_soak_page_words_each_finding_from_its_codes() -> None:
    result = every_kind_result()
    page = soak_markdown(SoakRunRecord(3, "2026-01-01T00:00:00.000Z", False, result))
    top = result.findings[0]
    assert f"## Finding 1: {layer_title(top.layer)}" in page
    assert f"- advice: {layer_advice(top.layer)}" in page and "- worker: decode" in page
    first = finding_evidence(top, result.observations)[1]  # after the worker
    assert f"- {'supports' if first.supports else 'contradicts'}: {first.text}" in page


def test_the_page_of_an_older_row_words_its_findings_too() -> None:
    row = OLDER["rows"][0]
    soak = read_soak_run(
        {**row, "config": json.loads(row["config"]), "result": json.loads(row["result"]),
         "findings": [json.loads(f) for f in row["findings"]], "ok": bool(row["ok"])}
    )  # fmt: skip
    page = soak_markdown(soak)
    assert "# Soak 1: failed" in page
    assert f"## Finding 1: {layer_title(Layer.CLIENT_PROXY)}" in page
    assert "- supports: same payload on a fresh connection via the entry point: HTTP 200" in page


def test_the_ledger_export_words_each_soaks_findings_and_reads_back(tmp_path: Path) -> None:
    result = every_kind_result()
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        ledger.record_soak(result)
        doc = json.loads("".join(ledger_json_chunks(ledger.snapshot())))
    (soak,) = doc["soak_runs"]
    top = soak["result"]["findings"][0]
    assert top["title"] == layer_title(result.findings[0].layer)
    assert top["evidence"][0] == {"id": "worker", "supports": True, "text": "worker: decode",
                                  "data": {"worker": "decode"}}  # fmt: skip
    assert decode(LedgerExport, doc).soak_runs[0].result == result  # docs from an export


def test_the_page_of_a_soak_without_a_finding_shows_its_failures_matrix_and_why() -> None:
    result = every_kind_result()
    undecided = Undecided(UndecidedReason.NOT_REPRODUCED, ("failure.http_5xx",), (),
                          NextProbe.SOAK_AGAIN)  # fmt: skip
    error_page = "<html>\n<head><title>503</title></head>\n<body>busy</body>\n</html>"
    failures = (replace(result.failures[1], detail=error_page), *result.failures[2:])
    bare = replace(result, findings=(), dropped=(), undecided=undecided, failures=failures)
    page = soak_markdown(SoakRunRecord(4, "2026-01-01T00:00:00.000Z", False, bare))
    assert "No finding." not in page
    assert "- session 1 round 0: http_5xx (HTTP 503): <html> <head><title>503</title>" in page
    assert "<head>\n" not in page  # an error page is cut to one line
    assert "### replay matrix for stall_head" in page and "  located: " in page
    assert "No finding: the failure did not reproduce" in page
    assert f"- next probe: {probe_advice(NextProbe.SOAK_AGAIN)}" in page
    assert "requests sent again (1; a plain client fails these):" in page  # the resend masked


def test_the_router_sentence_gives_smgs_pd_ttft_when_it_has_one() -> None:
    plain = RouterHealth("router_metrics", "router", True, True, 0.0, {})
    assert describe_observation(plain) == (
        "router metrics: 0 request(s) in flight past 30 s, errors none"
    )
    smg = replace(plain, pd_ttft_s=0.0425)
    assert describe_observation(smg).endswith("errors none, PD TTFT mean 42 ms")
