"""Text renderings of verifications: each check's reason, one table per layer and a summary (no I/O,
returns str).

A check carries an outcome code (:mod:`servelab.core.verify.checks`) and its data;
:func:`check_detail` words it, for a live :class:`~servelab.ops.verify.verify.Check` and for the
ledger's :class:`~servelab.core.ledger.evidence.CheckRecord` alike (an older ledger's row that
stored its sentence instead of a code reads that sentence). :func:`check_json` is a check's JSON
with that sentence as ``detail``: what ``verify --json``, ``restart --json`` and ``ledger export``
print.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from servelab.core.knobs.rules import LIVE_LOST_ON_RESTART, LIVE_RESTART_NEEDED, LIVE_UNSET
from servelab.core.ledger.evidence import CheckRecord
from servelab.core.verify.checks import (
    CHECK_CONFIG_ERROR,
    CHECK_CONFIG_MATCHES_SPEC,
    CHECK_CONFIG_MISSING,
    CHECK_CONFIG_NO_ENV_FILE,
    CHECK_CONFIG_NO_KNOBS,
    CHECK_CONFIG_NOT_PINNED,
    CHECK_CONFIG_PIN_MISMATCH,
    CHECK_CONFIG_UNREADABLE,
    CHECK_E2E_ERROR,
    CHECK_E2E_FAILED,
    CHECK_E2E_PASSED,
    CHECK_E2E_SECOND_FAILED,
    CHECK_E2E_WORKER_REACHED,
    CHECK_E2E_WORKER_UNCOUNTED,
    CHECK_E2E_WORKER_UNREACHED,
    CHECK_HEALTH_ERROR,
    CHECK_HEALTH_HTTP_ERROR,
    CHECK_HEALTH_READY,
    CHECK_HEALTH_UNREACHABLE,
    CHECK_HEALTH_WORKER_READY,
    CHECK_HEALTH_WORKERS_MISSING,
    CHECK_LIVE_DIFFERS,
    CHECK_LIVE_ERROR,
    CHECK_LIVE_FILE_UNREADABLE,
    CHECK_LIVE_LOST_ON_RESTART,
    CHECK_LIVE_MATCH,
    CHECK_LIVE_NO_ENV_FILE,
    CHECK_LIVE_NO_KNOBS,
    CHECK_LIVE_NO_PROCESS,
    CHECK_LIVE_RESTART_NEEDED,
    CHECK_LIVE_UNSET,
)
from servelab.core.verify.coldstart import (
    REASON_FIRST_SINCE_START,
    REASON_NO_SECOND_PROBE,
    REASON_SECOND_PROBE,
    REASON_SERVED_BEFORE,
    REASON_SLOWER_THAN_SECOND,
)
from servelab.ops.verify.verify import LAYERS, Check, VerifyReport
from servelab.report.knob import VERDICT_WORDS
from servelab.report.text import plain_text, show_value

__all__ = [
    "WORKER_NOTE",
    "check_detail",
    "check_json",
    "render_verify",
    "verify_json",
    "with_details",
]

#: What a PD worker's passing health check does not prove.
WORKER_NOTE = "a PD worker's own health check never exercises the KV transfer (see e2e)"

_TITLES = {
    "config": "config: env file vs spec and backup",
    "live": "live: /proc/PID/environ vs env file",
    "health": "health: readiness endpoints",
    "e2e": "e2e: streaming chat completion through the entry point (xPyD: every worker)",
}

Data = Mapping[str, Any]


# -- one check's reason -------------------------------------------------------------------------


def check_detail(check: Check | CheckRecord) -> str:
    """The check's reason in one line, from its code and data (an older ledger row: the sentence
    it stored; an unknown code: the code itself)."""
    render = _RENDERERS.get(check.code or "")
    if render is not None:
        return render(check.data)
    stored = check.detail if isinstance(check, CheckRecord) else None
    return stored or check.code or ""


def _error(data: Data) -> str:
    return str(data.get("error") or "unreadable")


def _config_tail(data: Data) -> str:
    """``; changed since backup: …`` / ``; same as backup`` and a disagreeing recorded change."""
    value = data.get("file")
    tail = ""
    if data.get("backup_path") is not None and data.get("backup") != value:
        tail += f"; changed since backup: {show_value(data.get('backup'))} -> {show_value(value)}"
    elif data.get("backup_path") is not None:
        tail += "; same as backup"
    if "recorded_change_id" in data and data.get("recorded") != value:
        tail += (
            f"; the last recorded change (#{data['recorded_change_id']}) set "
            f"{show_value(data.get('recorded'))}: edited outside servelab?"
        )
    return tail


def _config_value(data: Data) -> str:
    value = data.get("file")
    return f"file {value}" if value is not None else "not set in file (engine default)"


def _no_env_file(data: Data) -> str:
    more = "; declared knobs are compared live against the spec only" if data.get("knobs") else ""
    return "no env_file in the spec" + more


def _pin_mismatch(data: Data) -> str:
    return f"file {show_value(data.get('file'))}, spec pins {data.get('spec')}" + _config_tail(data)


def _live_vs_spec(data: Data) -> str:
    pin = data.get("spec")
    pinned = f", spec pins {pin}" if pin is not None else ""
    return f"live {show_value(data.get('live'))}{pinned}; no env file to compare"


def _health_ready(data: Data) -> str:
    ms = float(data.get("elapsed_s") or 0) * 1000
    text = f"{data.get('path')} {data.get('status')} in {ms:.0f} ms"
    if "healthy_workers" in data:
        text += f" ({data['healthy_workers']}/{data.get('total_workers')} workers healthy)"
    rows = data.get("workers")
    if isinstance(rows, list) and rows:
        listed = [f"{row.get('service')} {_listed(row)}" for row in rows if isinstance(row, dict)]
        text += "; router lists " + ", ".join(listed)
    return text


def _listed(row: Data) -> str:
    if not row.get("listed"):
        return "missing"
    return "healthy" if row.get("healthy") else "unhealthy"


def _request_failure(timing: Data) -> str:
    """Why one e2e request failed: its error (``HTTP 500``, ``idle timeout``...) and what came with
    it, else that the stream held no content token."""
    error = timing.get("error")
    if error is None:
        return "no content tokens in the stream"
    snippet = timing.get("error_detail") or ""
    return str(error).replace("http ", "HTTP ", 1) + (f": {snippet}" if snippet else "")


def _start_reason(data: Data) -> str:
    """Why the first request counts as cold or warm: its reason code
    (:mod:`servelab.core.verify.coldstart`), rendered with the timings it was judged on."""
    reason, before, second = (
        data.get("start_reason"),
        data.get("decode_requests_before"),
        data.get("second"),
    )
    t1 = float(data.get("total_s") or 0.0)
    t2 = float(second.get("total_s") or 0.0) if isinstance(second, Mapping) else 0.0
    if reason == REASON_FIRST_SINCE_START:
        return "first request since the decode started"
    if reason == REASON_SERVED_BEFORE:
        served = sum(before) if isinstance(before, list) else "some"
        return f"decode served {served} request(s) before"
    if reason == REASON_NO_SECOND_PROBE:
        return "no second probe to compare with"
    if reason == REASON_SLOWER_THAN_SECOND:
        return f"{t1 / max(t2, 1e-6):.1f}x slower than an immediate second probe"
    if reason == REASON_SECOND_PROBE:
        return f"an immediate second probe took {t2:.2f} s"
    return str(reason or "no reason recorded")


def _e2e_passed(data: Data) -> str:
    ttft = data.get("ttft_s")
    text = (
        f"{data.get('status')} in {float(data.get('total_s') or 0):.2f} s, "
        f"TTFT {float(ttft or 0):.2f} s, {data.get('completion_tokens')} tokens; "
        f"{data.get('start')} ({_start_reason(data)})"
    )
    second = data.get("second")
    if isinstance(second, Mapping):
        text += f"; second probe {float(second.get('total_s') or 0):.2f} s"
    return text


def _second_failed(data: Data) -> str:
    second = data.get("second")
    return "first request ok, the second failed: " + _request_failure(
        second if isinstance(second, Mapping) else {}
    )


_RENDERERS: dict[str, Callable[[Data], str]] = {
    CHECK_CONFIG_NO_ENV_FILE: _no_env_file,
    CHECK_CONFIG_MISSING: lambda d: f"env file {d.get('env_file')} does not exist",
    CHECK_CONFIG_UNREADABLE: _error,
    CHECK_CONFIG_ERROR: _error,
    CHECK_CONFIG_NO_KNOBS: lambda d: "env file parses; no declared knobs",
    CHECK_CONFIG_MATCHES_SPEC: lambda d: _config_value(d) + "; matches spec" + _config_tail(d),
    CHECK_CONFIG_NOT_PINNED: lambda d: _config_value(d) + _config_tail(d),
    CHECK_CONFIG_PIN_MISMATCH: _pin_mismatch,
    CHECK_LIVE_ERROR: _error,
    CHECK_LIVE_NO_PROCESS: lambda d: f"no running process found ({d.get('pid_source')})",
    CHECK_LIVE_NO_KNOBS: lambda d: f"pid {d.get('pid')} ({d.get('pid_source')}); no declared knobs",
    CHECK_LIVE_FILE_UNREADABLE: lambda d: f"pid {d.get('pid')}: env file unreadable",
    CHECK_LIVE_MATCH: lambda d: f"live {d.get('live')} = file",
    CHECK_LIVE_UNSET: lambda d: VERDICT_WORDS[LIVE_UNSET],
    CHECK_LIVE_RESTART_NEEDED: lambda d: (
        f"{VERDICT_WORDS[LIVE_RESTART_NEEDED]} (file {d.get('file')})"
    ),
    CHECK_LIVE_LOST_ON_RESTART: lambda d: (
        f"{VERDICT_WORDS[LIVE_LOST_ON_RESTART]} (live {d.get('live')})"
    ),
    CHECK_LIVE_DIFFERS: lambda d: (
        f"differs: file {d.get('file')}, live {d.get('live')} (restart needed)"
    ),
    CHECK_LIVE_NO_ENV_FILE: _live_vs_spec,
    CHECK_HEALTH_ERROR: _error,
    CHECK_HEALTH_UNREACHABLE: lambda d: f"{d.get('path')}: unreachable: {d.get('error')}",
    CHECK_HEALTH_HTTP_ERROR: lambda d: (
        f"{d.get('path')}: HTTP {d.get('status')}: {d.get('body') or ''}"
    ),
    CHECK_HEALTH_READY: _health_ready,
    CHECK_HEALTH_WORKER_READY: lambda d: f"{_health_ready(d)}; {WORKER_NOTE}",
    CHECK_HEALTH_WORKERS_MISSING: lambda d: (
        f"{_health_ready(d)}; but the router does not list {', '.join(d.get('missing') or [])} "
        "(out of the router: `servelab restart --rolling NAME` puts a worker back)"
    ),
    CHECK_E2E_ERROR: _error,
    CHECK_E2E_FAILED: lambda d: f"chat completion failed: {_request_failure(d)}",
    CHECK_E2E_SECOND_FAILED: _second_failed,
    CHECK_E2E_PASSED: _e2e_passed,
    CHECK_E2E_WORKER_REACHED: lambda d: (
        f"reached through {d.get('via')}: served requests {d.get('served_before')} -> "
        f"{d.get('served_after')} after {d.get('requests_sent')} request(s)"
    ),
    CHECK_E2E_WORKER_UNREACHED: lambda d: (
        f"not reached through {d.get('via')}: served requests stayed at "
        f"{d.get('served_before')} over {d.get('requests_sent')} request(s) "
        f"(HTTP {', '.join(str(s) for s in d.get('statuses') or [])})"
    ),
    CHECK_E2E_WORKER_UNCOUNTED: lambda d: (
        "not proven: no served-request counter (not a servelab sim); "
        f"{d.get('requests_sent')} request(s) went through {d.get('via')}"
    ),
}


# -- JSON with the reasons ----------------------------------------------------------------------


def check_json(check: Check | CheckRecord) -> dict[str, Any]:
    """The check's flat JSON (``{"layer", "service", "ok", "code", **data}``) with its reason as
    ``detail``."""
    return {**check.to_json(), "detail": check_detail(check)}


def with_details(checks: Any) -> list[Any]:
    """A list of checks' flat JSON (as a ``restart`` report or a case event holds them), each with
    its reason as ``detail``; anything else in the list is left as it is."""
    return [
        check_json(CheckRecord.from_json(c)) if isinstance(c, Mapping) else c for c in checks or ()
    ]


def verify_json(report: VerifyReport) -> dict[str, Any]:
    """``verify --json``: the report with every check's reason as ``detail``."""
    return {**report.to_json(), "checks": [check_json(check) for check in report.checks]}


# -- tables -------------------------------------------------------------------------------------


def _layer_table(layer: str, checks: list[Check]) -> Table:
    table = Table(title=_TITLES.get(layer, layer), title_justify="left", expand=False)
    table.add_column("service", no_wrap=True)
    table.add_column("knob" if layer in ("config", "live") else "what", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail / reason", overflow="fold")
    for check in checks:
        what = check.data.get("knob") or check.data.get("path") or check.data.get("model") or ""
        table.add_row(
            Text(check.service),
            Text(str(what)),
            Text("PASS" if check.ok else "FAIL"),
            Text(check_detail(check)),
        )
    return table


def _summary(report: VerifyReport) -> str:
    failed = report.failures
    head = "PASS" if report.ok else "FAIL"
    line = f"verify {head}: {len(report.checks) - len(failed)}/{len(report.checks)} checks passed"
    line += f" in {report.elapsed_s:.2f} s"
    if report.verification_id is not None:
        line += f"; recorded as verification #{report.verification_id}"
    for check in failed:
        line += f"\n  FAIL {check.layer} {check.service}: {check_detail(check)}"
    return line


def render_verify(report: VerifyReport) -> str:
    """One table per layer (in layer order), then a summary naming every failure."""
    tables = [_layer_table(layer, report.layer(layer)) for layer in LAYERS if report.layer(layer)]
    return plain_text(*tables) + _summary(report) + "\n"
