"""The soak report's words for the run-telemetry evidence: fired rules with the metrics they cite,
silent sources as UNKNOWN, quiet rules not on the console."""

from __future__ import annotations

from dataclasses import replace

from servelab.core.soak.result import SoakConfig, SoakResult, Targets, WorkerTarget
from servelab.core.telemetry.rules import ClientWindow, ServerView, assess, telemetry_observations
from servelab.report.soak.soak import render_soak, telemetry_lines
from tests.support.telemetry import FAILED, transfer_failure_telemetry


def _result() -> SoakResult:
    run = transfer_failure_telemetry()
    workers = (
        WorkerTarget("prefill", "prefill", "http://p"),
        WorkerTarget("decode", "decode", "http://d"),
    )
    observed = telemetry_observations(assess(ServerView(run, {}, ClientWindow(0))))
    targets = Targets("http://r", "http://r", workers)
    return SoakResult(SoakConfig(), targets, telemetry=run, observations=tuple(observed))


def test_fired_rules_and_silent_sources_are_listed_with_what_they_read() -> None:
    lines = telemetry_lines(_result())
    assert lines[0] == "run telemetry (router and engine metrics over the soak):"
    assert (
        f"  ! decode KV transfer counters over the run: KV transfers failed: {FAILED} +2" in lines
    )
    assert (
        "  ? prefill waiting queue at the engine's cap over the run: UNKNOWN (HTTP 404; "
        "not healthy)" in lines
    )
    text = render_soak(_result())
    assert "router counters" not in text  # quiet: JSON only
    assert "client tokens" not in text  # too few tokens to judge: JSON only


def test_no_telemetry_no_lines() -> None:
    assert telemetry_lines(replace(_result(), telemetry=None)) == []
