"""How a check reads: every outcome code rendered from its data (the sentences of docs/verify.md),
an older ledger row's stored sentence, and the JSON that carries the reasons."""

from __future__ import annotations

import re
from typing import Any

import pytest

from servelab.core.ledger.evidence import CheckRecord
from servelab.core.verify import checks as codes
from servelab.core.verify.checks import CHECK_CODES
from servelab.ops.deploy.results import RestartReport
from servelab.ops.verify.e2e import _classify
from servelab.ops.verify.verify import LAYERS, Check, E2EOptions, VerifyReport
from servelab.report.deploy import render_restart, restart_json
from servelab.report.verify import (
    WORKER_NOTE,
    check_detail,
    check_json,
    render_verify,
    verify_json,
    with_details,
)
from tests.support import REPO

_BACKUP = {"backup": "384", "backup_path": "/env/decode.env.bak"}
_PD = {"path": "/health", "status": 200, "elapsed_s": 0.012}

#: (code, data, the sentence): every row of docs/verify.md's tables, and the edges between them.
CASES: list[tuple[str, dict[str, Any], str]] = [
    (codes.CHECK_CONFIG_NO_ENV_FILE, {"knobs": False}, "no env_file in the spec"),
    (codes.CHECK_CONFIG_NO_ENV_FILE, {"knobs": True},
     "no env_file in the spec; declared knobs are compared live against the spec only"),
    (codes.CHECK_CONFIG_MISSING, {"env_file": "/etc/sglang/decode.env"},
     "env file /etc/sglang/decode.env does not exist"),
    (codes.CHECK_CONFIG_UNREADABLE, {"env_file": "d.env", "error": "d.env:3: 'export' is shell"},
     "d.env:3: 'export' is shell"),
    (codes.CHECK_CONFIG_UNREADABLE, {"env_file": "d.env", "error": None}, "unreadable"),
    (codes.CHECK_CONFIG_ERROR, {"env_file": "d.env", "error": "HostError: x"}, "HostError: x"),
    (codes.CHECK_CONFIG_NO_KNOBS, {"env_file": "d.env"}, "env file parses; no declared knobs"),
    (codes.CHECK_CONFIG_MATCHES_SPEC, {"file": "512", "spec": "512", "backup_path": None},
     "file 512; matches spec"),
    (codes.CHECK_CONFIG_MATCHES_SPEC, {"file": "512", "spec": "512", **_BACKUP},
     "file 512; matches spec; changed since backup: 384 -> 512"),
    (codes.CHECK_CONFIG_NOT_PINNED, {"file": "384", "spec": None, **_BACKUP},
     "file 384; same as backup"),
    (codes.CHECK_CONFIG_NOT_PINNED, {"file": None, "spec": None, "backup_path": None},
     "not set in file (engine default)"),
    (codes.CHECK_CONFIG_NOT_PINNED,
     {"file": "128", "backup": "256", "backup_path": "/b", "recorded": "256",
      "recorded_change_id": 7},
     "file 128; changed since backup: 256 -> 128; the last recorded change (#7) set 256: "
     "edited outside servelab?"),
    (codes.CHECK_CONFIG_NOT_PINNED,
     {"file": "256", "backup_path": None, "recorded": "256", "recorded_change_id": 7}, "file 256"),
    (codes.CHECK_CONFIG_PIN_MISMATCH, {"file": "256", "spec": "512", "backup_path": None},
     "file 256, spec pins 512"),
    (codes.CHECK_CONFIG_PIN_MISMATCH, {"file": None, "spec": "512", "backup_path": None},
     "file (unset), spec pins 512"),
    (codes.CHECK_LIVE_ERROR, {"error": "HostError: permission denied"},
     "HostError: permission denied"),
    (codes.CHECK_LIVE_NO_PROCESS, {"pid": None, "pid_source": "no pid record, unit or listener"},
     "no running process found (no pid record, unit or listener)"),
    (codes.CHECK_LIVE_NO_KNOBS, {"pid": 16490, "pid_source": "pid record"},
     "pid 16490 (pid record); no declared knobs"),
    (codes.CHECK_LIVE_FILE_UNREADABLE, {"pid": 4242, "pid_source": "pid record"},
     "pid 4242: env file unreadable"),
    (codes.CHECK_LIVE_MATCH, {"file": "512", "live": "512"}, "live 512 = file"),
    (codes.CHECK_LIVE_UNSET, {"file": None, "live": None},
     "not set in file or live (engine default)"),
    (codes.CHECK_LIVE_RESTART_NEEDED, {"file": "512", "live": None},
     "in file but not live: restart needed (file 512)"),
    (codes.CHECK_LIVE_LOST_ON_RESTART, {"file": None, "live": "512"},
     "live but not in file: lost on next restart (live 512)"),
    (codes.CHECK_LIVE_DIFFERS, {"file": "384", "live": "512"},
     "differs: file 384, live 512 (restart needed)"),
    (codes.CHECK_LIVE_NO_ENV_FILE, {"live": "512", "spec": "512"},
     "live 512, spec pins 512; no env file to compare"),
    (codes.CHECK_LIVE_NO_ENV_FILE, {"live": None, "spec": None},
     "live (unset); no env file to compare"),
    (codes.CHECK_HEALTH_ERROR, {"error": "SSHError: no route"}, "SSHError: no route"),
    (codes.CHECK_HEALTH_UNREACHABLE, {"path": "/health", "status": None, "error": "refused"},
     "/health: unreachable: refused"),
    (codes.CHECK_HEALTH_HTTP_ERROR, {"path": "/readiness", "status": 503, "body": "no workers"},
     "/readiness: HTTP 503: no workers"),
    (codes.CHECK_HEALTH_READY,
     {"path": "/readiness", "status": 200, "elapsed_s": 0.011, "healthy_workers": 2,
      "total_workers": 2},
     "/readiness 200 in 11 ms (2/2 workers healthy)"),
    (codes.CHECK_HEALTH_READY, {"path": "/health", "status": 200, "elapsed_s": 0.003},
     "/health 200 in 3 ms"),
    (codes.CHECK_HEALTH_WORKER_READY, _PD, f"/health 200 in 12 ms; {WORKER_NOTE}"),
    (codes.CHECK_E2E_ERROR, {"error": "HostError: no forward"}, "HostError: no forward"),
    (codes.CHECK_E2E_FAILED, {"status": 500, "error": "http 500", "error_detail": "boom"},
     "chat completion failed: HTTP 500: boom"),
    (codes.CHECK_E2E_FAILED, {"status": None, "error": "idle timeout", "error_detail": ""},
     "chat completion failed: idle timeout"),
    (codes.CHECK_E2E_FAILED, {"status": 200, "error": None, "completion_tokens": 0},
     "chat completion failed: no content tokens in the stream"),
    (codes.CHECK_E2E_SECOND_FAILED,
     {"status": 200, "error": None, "second": {"error": "http 502", "error_detail": "gateway"}},
     "first request ok, the second failed: HTTP 502: gateway"),
    (codes.CHECK_E2E_PASSED,
     {"status": 200, "total_s": 0.09, "ttft_s": 0.02, "completion_tokens": 16,
      "decode_requests_before": [2], "start": "warm",
      "start_reason": "served-before"},
     "200 in 0.09 s, TTFT 0.02 s, 16 tokens; warm (decode served 2 request(s) before)"),
    (codes.CHECK_E2E_PASSED,
     {"status": 200, "total_s": 8.59, "ttft_s": 8.52, "completion_tokens": 16,
      "decode_requests_before": [0], "start": "cold", "second": {"total_s": 0.09},
      "start_reason": "first-since-start"},
     "200 in 8.59 s, TTFT 8.52 s, 16 tokens; cold (first request since the decode started); "
     "second probe 0.09 s"),
    (codes.CHECK_E2E_PASSED,
     {"status": 200, "total_s": 4.61, "ttft_s": 4.5, "completion_tokens": 16,
      "decode_requests_before": None, "start": "cold", "second": {"total_s": 0.1},
      "start_reason": "slower-than-second"},
     "200 in 4.61 s, TTFT 4.50 s, 16 tokens; cold (46.1x slower than an immediate second probe); "
     "second probe 0.10 s"),
    (codes.CHECK_E2E_PASSED,
     {"status": 200, "total_s": 0.12, "ttft_s": 0.05, "completion_tokens": 16,
      "decode_requests_before": None, "start": "warm", "second": {"total_s": 0.1},
      "start_reason": "second-probe"},
     "200 in 0.12 s, TTFT 0.05 s, 16 tokens; warm (an immediate second probe took 0.10 s); "
     "second probe 0.10 s"),
    (codes.CHECK_HEALTH_WORKERS_MISSING,
     {"path": "/readiness", "status": 200, "elapsed_s": 0.009, "healthy_workers": 3,
      "total_workers": 3, "missing": ["decode-1"],
      "workers": [{"service": "decode-1", "listed": False, "healthy": False},
                  {"service": "decode-2", "listed": True, "healthy": True}]},
     "/readiness 200 in 9 ms (3/3 workers healthy); router lists decode-1 missing, decode-2 "
     "healthy; but the router does not list decode-1 (out of the router: `servelab restart "
     "--rolling NAME` puts a worker back)"),
    (codes.CHECK_E2E_WORKER_REACHED,
     {"via": "router", "served_before": 4, "served_after": 5, "requests_sent": 3},
     "reached through router: served requests 4 -> 5 after 3 request(s)"),
    (codes.CHECK_E2E_WORKER_UNREACHED,
     {"via": "router", "served_before": 4, "served_after": 4, "requests_sent": 2,
      "statuses": [200, 200]},
     "not reached through router: served requests stayed at 4 over 2 request(s) (HTTP 200, 200)"),
    (codes.CHECK_E2E_WORKER_UNCOUNTED,
     {"via": "router", "served_before": None, "served_after": None, "requests_sent": 16},
     "not proven: no served-request counter (not a servelab sim); 16 request(s) went through "
     "router"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "data", "sentence"), CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                                    enumerate(CASES)])  # fmt: skip
def test_each_code_reads_as_its_sentence(code: str, data: dict[str, Any], sentence: str) -> None:
    layer = code.split(".", 1)[0]
    assert check_detail(Check(layer, "decode", True, code, data)) == sentence
    stored = CheckRecord(layer, "decode", True, None, data, code)
    assert check_detail(stored) == sentence  # the ledger's record reads the same


def test_every_code_has_a_sentence_and_a_row_in_docs_verify_md() -> None:
    assert {code for code, _data, _sentence in CASES} == CHECK_CODES
    docs = (REPO / "docs" / "verify.md").read_text(encoding="utf-8")
    undocumented = [code for code in sorted(CHECK_CODES) if f"`{code}`" not in docs]
    assert not undocumented, f"codes missing from docs/verify.md: {undocumented}"
    assert all(re.fullmatch(r"(config|live|health|e2e)\.[a-z_]+", code) for code in CHECK_CODES)


def test_an_older_rows_sentence_and_an_unknown_code_still_read() -> None:
    older = CheckRecord("live", "decode", False, "differs: file 1, live 2", {"knob": "K"})
    assert check_detail(older) == "differs: file 1, live 2"
    assert check_detail(CheckRecord("live", "decode", False, None, {}, "live.someday")) == (
        "live.someday"
    )
    assert check_detail(CheckRecord("live", "decode", False, None, {})) == ""


@pytest.mark.parametrize(
    ("before", "first", "second"),
    [([0], 8.59, 0.09), ([3], 0.1, None), (None, 17.9, 1.2), (None, 1.3, 1.2), (None, 1.0, None)],
)
def test_the_cold_or_warm_reason_agrees_with_the_rule(
    before: list[int] | None, first: float, second: float | None
) -> None:
    """The e2e sentence says why the request was cold or warm as ``_classify`` decided it."""
    second_timing = None if second is None else {"total_s": second}
    start = _classify(before, {"total_s": first}, second_timing, E2EOptions())
    data: dict[str, Any] = {"status": 200, "total_s": first, "ttft_s": 0.01, "start": start.start,
                            "start_reason": start.reason, "completion_tokens": 16,
                            "decode_requests_before": before}  # fmt: skip
    if second_timing is not None:
        data["second"] = second_timing
    detail = check_detail(Check("e2e", "router", True, "e2e.passed", data))
    assert f"; {start.start} (" in detail and "no reason recorded" not in detail


def test_the_json_carries_the_code_and_the_reason() -> None:
    bad = Check("live", "decode", False, codes.CHECK_LIVE_DIFFERS, {"file": "1", "live": "2"})
    good = Check("health", "router", True, codes.CHECK_HEALTH_READY, _PD)
    report = VerifyReport([good, bad], "h", LAYERS, ["decode", "router"], 0.2, 9)
    doc = verify_json(report)
    assert doc["checks"][1] == {
        **bad.to_json(),
        "detail": "differs: file 1, live 2 (restart needed)",
    }
    assert doc["checks"][0]["code"] == "health.ready" and doc["ok"] is False
    assert check_json(bad.record()) == doc["checks"][1]
    assert with_details([bad.to_json(), "x"]) == [doc["checks"][1], "x"]
    text = render_verify(report)
    assert "FAIL live decode: differs: file 1, live 2 (restart needed)" in text
    assert "recorded as verification #9" in text


def test_a_restart_shows_its_failed_checks_reasons() -> None:
    bad = Check("live", "decode", False, codes.CHECK_LIVE_DIFFERS, {"file": "1", "live": "2"})
    verification = VerifyReport([bad], "h", LAYERS, ["decode"], 0.1)
    report = RestartReport(["decode", "router"], [], verification=verification)
    assert "live/decode: differs: file 1, live 2 (restart needed)" in render_restart(report)
    assert "FAILED (1 check(s))" in render_restart(report)
    (shown,) = restart_json(report)["verification"]["checks"]
    assert (shown["code"], shown["detail"]) == ("live.differs", check_detail(bad))
    assert restart_json(RestartReport(["decode"], []))["verification"] is None
