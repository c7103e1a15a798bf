"""A traced soak through the real sglang-router: the receiver runs for the soak, every span it got
is recorded with the soak in the ledger (a real SQLite file, ``spans.soak_id``), and each failed
or stalled request is named with the worker phases its spans reached: with the decode's KV
transfers failing (``transfer_fail_over_tokens``) the spans come back up to ``prefill`` and none
says the KV arrived (as SGLang, a failed transfer exports no ``decode_transferred``): it stopped
in the KV transfer, as a wedged decode's request does."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.spec import TracingSpec
from servelab.core.soak.record import SoakRunRecord
from servelab.core.soak.result import SoakConfig, SoakResult
from servelab.core.telemetry.spans import phases_seen
from servelab.core.telemetry.traces import RequestPhases, spans_by_request
from servelab.io.ledger.ledger import Ledger
from servelab.ops.soak.soak import soak
from servelab.ops.telemetry.tracing import LATE_SPANS_S, TraceCollector
from servelab.report.soak.soak import render_soak
from servelab.sim.settings import ENV_OTLP
from tests.support import free_ports
from tests.support.http import set_faults
from tests.support.soak import soak_targets
from tests.support.stack import SimStack, sim_stack

SCALE = 0.05


@pytest.fixture
def traced() -> Iterator[tuple[SimStack, str]]:
    (port,) = free_ports(1)
    endpoint = f"127.0.0.1:{port}"
    with sim_stack(time_scale=SCALE, env={ENV_OTLP: endpoint}) as st:
        yield st, endpoint


def _soak(st: SimStack, endpoint: str, ledger: Ledger, config: SoakConfig) -> SoakResult:
    collector = TraceCollector(TracingSpec(endpoint=endpoint, wait_s=20.0))
    started = time.monotonic()
    result = asyncio.run(soak(config, soak_targets(st), ledger=ledger, traces=collector))
    # bounded: the wait for the failed requests' spans ends by the soak's deadline (+ a grace)
    assert time.monotonic() - started < config.duration_s + LATE_SPANS_S + 1.0
    return result


def _check_recorded(ledger: Ledger, result: SoakResult) -> tuple[RequestPhases, ...]:
    """Every span received is recorded with the soak, each failed request's among them; the
    failed requests' phases as the soak named them."""
    assert result.soak_id is not None and result.traces is not None
    recorded = ledger.spans(soak_id=result.soak_id)
    assert recorded and len(recorded) == result.traces.n_spans
    by_request = spans_by_request(recorded, [p.request_id for p in result.traces.requests])
    for p in result.traces.requests:
        assert p.seen == phases_seen(by_request[p.request_id])
    stored = ledger.get(SoakRunRecord, result.soak_id)
    assert stored is not None and stored.result.traces == result.traces
    return result.traces.requests


def test_failed_transfers_are_named_stopped_in_the_kv_transfer(
    traced: tuple[SimStack, str], tmp_path: Path
) -> None:
    st, endpoint = traced
    set_faults(st.decode_url, transfer_fail_over_tokens=1)
    cfg = SoakConfig(sessions=2, rounds=2, idle_timeout_s=3, duration_s=30, localize=False,
                     check_determinism=False)  # fmt: skip
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = _soak(st, endpoint, ledger, cfg)
        phases = _check_recorded(ledger, result)
    assert result.errors and result.traces is not None
    assert len(phases) == len(result.errors) == 2  # each session's first request failed
    for p in phases:
        assert p.outcome == "error" and p.request_id.startswith("servelab-")
        assert p.seen == ("prefill_queue", "prefill"), p
        assert p.last == "prefill" and p.first_missing == "kv_transfer"
    text = render_soak(result)
    assert "none for kv_transfer: it stopped in or after the prefill" in text, text
    assert f"traces: {result.traces.n_spans} span(s) received" in text


def test_a_wedged_decode_stall_is_named_with_its_phases(
    traced: tuple[SimStack, str], tmp_path: Path
) -> None:
    st, endpoint = traced
    set_faults(st.decode_url, wedge=True)
    cfg = SoakConfig(sessions=1, rounds=2, idle_timeout_s=2, duration_s=20, localize=False,
                     check_determinism=False, warm_up=False)  # fmt: skip
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        result = _soak(st, endpoint, ledger, cfg)
        (p,) = _check_recorded(ledger, result)
    assert result.stalls
    assert p.outcome == "stalled" and (p.session, p.round) == (0, 0)
    # the prefill finished; the wedged decode's KV transfer never did
    assert p.seen == ("prefill_queue", "prefill") and p.first_missing == "kv_transfer", p
    assert "none for kv_transfer: it stopped in or after the prefill" in render_soak(result)
    assert "session 0 round 0 (stalled" in render_soak(result)
