"""up/restart when something goes wrong midway: a progress callback that raises, rich markup in
a service's log, Ctrl-C (task cancellation) mid-up and mid-restart, a start command that stays in
the foreground. Real processes on free ports; every test checks nothing is left running."""

from __future__ import annotations

import asyncio
import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.record import DeploymentRecord
from servelab.core.ledger.codec import encode
from servelab.core.progress import ProgressEvent
from servelab.core.restart.contract import DeployReport, RestartReport
from servelab.errors import HealthTimeout, ServiceStartError
from servelab.io.hosts.host import LocalHost
from servelab.io.hosts.processes import read_pid_record
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.context import Progress
from servelab.ops.deploy import deploy
from servelab.ops.deploy.results import DeployInterrupted
from servelab.report.deploy import render_interruption, render_restart
from servelab.report.progress import describe_progress
from tests.ops.deploy.test_deploy import _generic, _load, _no_listeners
from tests.support import free_ports
from tests.support.processes import live_procs_under
from tests.support.progress import lines

HEADER = 'name = "t"\nstate_dir = "state"\n'


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(tmp_path / "ledger.db") as opened:
        yield opened


def _good_then_bad(tmp_path: Path, **bad: object) -> tuple[LoadedSpec, list[int]]:
    good, broken = free_ports(2)
    bad.setdefault("ready_path", "/missing")
    bad.setdefault("ready_timeout_s", 2.0)
    text = HEADER + _generic("good", good) + _generic("bad", broken, depends_on=["good"], **bad)
    return _load(tmp_path, text), [good, broken]


def _raising_on(word: str, seen: list[str]) -> Progress:
    def progress(event: ProgressEvent) -> None:
        message = describe_progress(event)
        seen.append(message)
        if word in message:
            raise RuntimeError(f"progress printer broke on {message!r}")

    return progress


def _last_up_row(ledger: Ledger) -> dict[str, object]:
    rows = [row for row in ledger.list(DeploymentRecord) if row.action == "up"]
    assert rows, "no ledger row for the failed up"
    return dict(rows[-1].detail)


async def test_progress_raising_in_the_failure_path_still_stops_and_records(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _good_then_bad(tmp_path)
    seen: list[str] = []
    with pytest.raises(HealthTimeout):
        await deploy.up(loaded, progress=_raising_on("up failed", seen), ledger=ledger)
    assert live_procs_under(tmp_path) == []
    assert _no_listeners(ports)
    row = _last_up_row(ledger)
    assert row["ok"] is False and str(row["error"]).startswith("bad: not ready")
    assert row["stopped"] == ["bad", "good"]
    assert any(m.startswith("good: stopped") for m in seen)


async def test_progress_raising_while_starting_stops_everything(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _good_then_bad(tmp_path, ready_path="/")
    with pytest.raises(RuntimeError, match="progress printer broke"):
        await deploy.up(loaded, progress=_raising_on("bad", []), ledger=ledger)
    assert live_procs_under(tmp_path) == []
    assert _no_listeners(ports)
    assert read_pid_record(loaded.state_dir, "bad") is None
    row = _last_up_row(ledger)
    assert row["ok"] is False and row["stopped"] == ["bad", "good"]


async def test_markup_in_a_service_log_reaches_a_rich_printer_safely(
    tmp_path: Path, ledger: Ledger
) -> None:
    """A printer that reads markup (rich's default) raises MarkupError on ``[/x]``: still clean."""
    loaded, ports = _good_then_bad(tmp_path, start='echo "[/x] [bold]boom" >&2; exit 3')
    console = Console(file=io.StringIO())
    with pytest.raises(ServiceStartError) as info:
        await deploy.up(
            loaded, progress=lambda event: console.print(describe_progress(event)), ledger=ledger
        )
    assert "[/x] [bold]boom" in str(info.value)
    assert live_procs_under(tmp_path) == []
    assert _no_listeners(ports)
    assert _last_up_row(ledger)["stopped"] == ["bad", "good"]


async def _cancel_when(task: asyncio.Task[object], messages: list[str], prefix: str) -> None:
    deadline = time.monotonic() + 30
    while not any(m.startswith(prefix) for m in messages):
        assert time.monotonic() < deadline and not task.done(), messages
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    task.cancel()


async def test_cancel_during_up_names_every_service_it_stopped(
    tmp_path: Path, ledger: Ledger
) -> None:
    loaded, ports = _good_then_bad(tmp_path, ready_timeout_s=60.0)
    messages: list[str] = []
    task = asyncio.create_task(deploy.up(loaded, progress=lines(messages), ledger=ledger))
    await _cancel_when(task, messages, "bad: started")  # type: ignore[arg-type]
    with pytest.raises(DeployInterrupted) as info:
        await task
    assert isinstance(info.value, asyncio.CancelledError)
    report = info.value.report
    assert isinstance(report, DeployReport)
    assert report.interrupted and not report.ok
    assert report.stopped == ["bad", "good"]
    assert not any("up failed: ;" in m for m in messages)
    assert any(m.startswith("bad: stopped") for m in messages)
    assert any(m.startswith("good: stopped") for m in messages)
    row = _last_up_row(ledger)
    assert row["interrupted"] is True and row["stopped"] == ["bad", "good"]
    text = render_interruption(report)
    assert "up interrupted" in text and "bad, good" in text
    assert live_procs_under(tmp_path) == []
    assert _no_listeners(ports)


async def test_cancel_during_restart_says_what_is_down_and_how_to_bring_it_back(
    tmp_path: Path, ledger: Ledger
) -> None:
    a, b = free_ports(2)
    marker = tmp_path / "ready-a"
    marker.write_text("ok")
    text = (
        HEADER
        + _generic("a", a, ready_path="/ready-a", ready_timeout_s=60.0)
        + _generic("b", b, depends_on=["a"])
    )
    loaded = _load(tmp_path, text)
    try:
        assert (await deploy.up(loaded)).ok
        marker.unlink()  # a's next start never gets ready
        messages: list[str] = []
        task = asyncio.create_task(
            deploy.restart(
                loaded, ["a"], verify_after=False, progress=lines(messages), ledger=ledger
            )
        )
        await _cancel_when(task, messages, "a: started")  # type: ignore[arg-type]
        with pytest.raises(DeployInterrupted) as info:
            await task
        report = info.value.report
        assert isinstance(report, RestartReport)
        assert report.interrupted and not report.ok
        assert report.down == ["a", "b"]
        assert report.recovery == ["servelab", "up", "-f", loaded.source]
        row = ledger.list(DeploymentRecord)[-1]
        assert row.action == "restart" and row.detail["interrupted"] is True
        assert row.detail["down"] == ["a", "b"]
        assert row.detail["recovery"] == f"servelab up -f {loaded.source}"
        for text in (render_interruption(report), render_restart(report)):
            assert "a, b" in text and f"servelab up -f {loaded.source}" in text
        assert _no_listeners([a, b])
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []


async def test_foreground_start_command_is_adopted_without_waiting(tmp_path: Path) -> None:
    """``exec python -m http.server`` never returns: ready means up, not a 60 s wait."""
    (port,) = free_ports(1)
    loaded = _load(tmp_path, HEADER + _generic("fg", port, start_timeout_s=60.0))
    try:
        started = time.monotonic()
        report = await deploy.up(loaded)
        assert time.monotonic() - started < 20
        step = report.steps[0]
        assert step.outcome == StepOutcome.OK and encode(step)["evidence"]["foreground"] is True
        owner = await LocalHost().listening_pid(port)
        assert owner is not None and step.pid == owner
        record = read_pid_record(loaded.state_dir, "fg")
        assert record is not None and record.extra["served_by"]["pid"] == owner
        started = time.monotonic()
        restarted = await deploy.restart(loaded, verify_after=False)
        assert restarted.ok and time.monotonic() - started < 20
    finally:
        await deploy.down(loaded)
    assert live_procs_under(tmp_path) == []
    assert _no_listeners([port])
