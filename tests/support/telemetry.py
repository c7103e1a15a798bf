"""A run's telemetry for report tests: the decode counted two failed KV transfers, the prefill's
metrics did not answer, the router answered."""

from __future__ import annotations

from servelab.core.telemetry.summary import RunTelemetry, SourceTelemetry

__all__ = ["FAILED", "transfer_failure_telemetry"]

#: The decode's failed-transfer counter, as the telemetry names it.
FAILED = 'sglang:num_transfer_failed_reqs_total{model_name="sim"}'


def transfer_failure_telemetry() -> RunTelemetry:
    """Scraped telemetry of one run: decode ``FAILED`` +2, prefill unknown (HTTP 404), router ok."""
    decode = SourceTelemetry(
        "decode", "engine", "u", "ok", None, 3, 2.0, {FAILED: 2.0}, role="decode"
    )
    prefill = SourceTelemetry("prefill", "engine", "u", "unknown", "HTTP 404", role="prefill")
    router = SourceTelemetry("router", "router", "u", "ok", None, 3, 2.0)
    return RunTelemetry("scrape", 2.0, (prefill, decode, router))
