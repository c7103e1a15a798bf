"""The readiness gate of a launched service: probe its readiness URL until it answers 2xx.

:func:`wait_ready` probes a service :func:`~servelab.io.hosts.processes.spawn` launched, and
fails at once when its process exits or its start command fails (quoting the log's tail,
redacted); :func:`wait_answering` probes a URL with no process known (a launch that timed out).
Both return a :class:`Readiness`: the outcome, the probes, the last answer, the command's state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass

from servelab.core.deploy.outcomes import StepOutcome
from servelab.core.deploy.probe import ProbeResult
from servelab.errors import HealthTimeout, ServiceStartError
from servelab.io.hosts.host import Host
from servelab.io.hosts.logs import tail
from servelab.io.hosts.processes import PidRecord, command_status, is_alive
from servelab.io.http.client import probe

__all__ = ["Readiness", "wait_answering", "wait_ready"]

_PROBE_TIMEOUT_S = 5.0


@dataclass
class Readiness:
    """How a launched service became ready: outcome, probes, the last answer, command state."""

    outcome: StepOutcome = StepOutcome.OK
    command_exit: int | None = None
    command_timed_out: bool = False
    foreground: bool = False
    probes: int = 0
    last: ProbeResult | None = None


async def _failure(
    host: Host, record: PidRecord, what: str, last: ProbeResult | None, secrets: Collection[str]
) -> str:
    """Why the service failed: its last probe answer and its log's last lines, redacted."""
    log_tail = await tail(host, record.log, secrets=secrets)
    answer = last.describe() if last is not None else "no probe answered yet"
    lines = [line for line in log_tail.strip().splitlines() if line.strip()][-5:]
    snippet = ("\n  " + "\n  ".join(lines)) if lines else ""
    return (
        f"{record.service}: {what}; last probe: {answer}; log: {record.host}:{record.log}{snippet}"
    )


async def _poll_command(host: Host, record: PidRecord, state: Readiness, deadline: float) -> None:
    if state.command_exit is None and not state.command_timed_out:
        state.command_exit = await command_status(host, record)
        state.command_timed_out = state.command_exit is None and time.monotonic() > deadline


async def _early_exit(
    host: Host, record: PidRecord, state: Readiness, deadline: float
) -> str | None:
    """Why the launch already failed, or None while the service may still come up."""
    if record.command is None:
        return None if await is_alive(host, record) else "the process exited before it was ready"
    await _poll_command(host, record, state, deadline)
    if state.command_exit not in (None, 0):
        return f"the start command exited with status {state.command_exit}"
    return None


def _probe_interval(started: float) -> float:
    """The wait before the next readiness probe: a tenth of the time waited so far, between 0.1
    and 1 s, so a service is seen ready within about a tenth of its start-up (a growing backoff,
    1.5x a probe up to 1 s, saw a service ready in 1.2 s only at 1.3 s, one ready in 2.1 s at
    3.1 s), and a long load (an engine's minutes) is probed once a second."""
    return min(1.0, max(0.1, (time.monotonic() - started) / 10))


async def wait_ready(
    host: Host,
    record: PidRecord,
    *,
    url: str,
    ready_timeout_s: float,
    start_timeout_s: float,
    secrets: Collection[str] = (),
) -> Readiness:
    """Probe ``url`` until 2xx or ``ready_timeout_s``; fail at once if the process exits.

    A shell start command is waited for until ``start_timeout_s`` (as an SSH session would be),
    but only while the service is not ready: a service ready while its command still runs is a
    *foreground* service (``foreground`` True; the caller adopts the serving pid), with no wait.
    A command still running at ``start_timeout_s`` before the service got ready is not a failure
    by itself: readiness decides, and the outcome says "command timed out; service healthy".
    Raises :class:`ServiceStartError` or :class:`HealthTimeout` naming the service, the last probe
    answer and the log's tail, with ``secrets`` (the service's env values) redacted.
    """
    started = time.monotonic()
    command_deadline = started + start_timeout_s
    state = Readiness()
    while True:
        failure = await _early_exit(host, record, state, command_deadline)
        if failure is not None:
            await asyncio.sleep(0.2)  # let the last words reach the log
            raise ServiceStartError(await _failure(host, record, failure, state.last, secrets))
        remaining = ready_timeout_s - (time.monotonic() - started)
        if remaining <= 0:
            what = f"not ready after {ready_timeout_s}s at {url}"
            raise HealthTimeout(await _failure(host, record, what, state.last, secrets))
        state.last = await probe(url, timeout=min(_PROBE_TIMEOUT_S, remaining))
        state.probes += 1
        if state.last.ok:
            break
        await asyncio.sleep(min(_probe_interval(started), max(remaining, 0.01)))
    if record.command is not None:
        await _poll_command(host, record, state, command_deadline)
    if state.command_exit not in (None, 0):
        what = f"the start command exited with status {state.command_exit}"
        raise ServiceStartError(await _failure(host, record, what, state.last, secrets))
    return _outcome(record, state)


async def wait_answering(url: str, *, ready_timeout_s: float) -> Readiness:
    """Probe ``url`` until 2xx or ``ready_timeout_s``, knowing no process (a launch that timed
    out): the :class:`Readiness` holds the last answer (``last.ok`` tells) and the probe count."""
    started = time.monotonic()
    state = Readiness()
    while (remaining := ready_timeout_s - (time.monotonic() - started)) > 0:
        state.last = await probe(url, timeout=min(_PROBE_TIMEOUT_S, remaining))
        state.probes += 1
        if state.last.ok:
            break
        await asyncio.sleep(min(_probe_interval(started), max(remaining, 0.01)))
    return state


def _outcome(record: PidRecord, state: Readiness) -> Readiness:
    if record.command is not None:
        state.foreground = state.command_exit is None and not state.command_timed_out
    if state.command_timed_out:
        state.outcome = StepOutcome.TIMED_OUT_HEALTHY
    return state
