"""The codes a verification check ends with: one short machine-readable name per outcome.

A check (:class:`servelab.ops.verify.verify.Check`, and the ledger's
:class:`~servelab.core.ledger.evidence.CheckRecord`) carries its layer, service, pass/fail, one of
these codes and its data (values, status, timings). The sentence a person reads is rendered from the
code and the data by :func:`servelab.report.verify.check_detail`; nothing below ``report/``
words a check. The ledger stores the code in a check's ``detail`` column (older ledgers hold the
sentence there, and it still reads).

Codes are ``LAYER.OUTCOME``; ``LAYER.error`` is an error that stopped the layer's check (its
message is the check's ``error`` datum).
"""

from __future__ import annotations

from servelab.core.knobs.rules import (
    LIVE_DIFFERS,
    LIVE_LOST_ON_RESTART,
    LIVE_MATCH,
    LIVE_RESTART_NEEDED,
    LIVE_UNSET,
)

__all__ = [
    "CHECK_CODES",
    "CHECK_CONFIG_ERROR",
    "CHECK_CONFIG_MATCHES_SPEC",
    "CHECK_CONFIG_MISSING",
    "CHECK_CONFIG_NOT_PINNED",
    "CHECK_CONFIG_NO_ENV_FILE",
    "CHECK_CONFIG_NO_KNOBS",
    "CHECK_CONFIG_PIN_MISMATCH",
    "CHECK_CONFIG_UNREADABLE",
    "CHECK_E2E_ERROR",
    "CHECK_E2E_FAILED",
    "CHECK_E2E_PASSED",
    "CHECK_E2E_SECOND_FAILED",
    "CHECK_E2E_WORKER_REACHED",
    "CHECK_E2E_WORKER_UNCOUNTED",
    "CHECK_E2E_WORKER_UNREACHED",
    "CHECK_HEALTH_ERROR",
    "CHECK_HEALTH_HTTP_ERROR",
    "CHECK_HEALTH_READY",
    "CHECK_HEALTH_UNREACHABLE",
    "CHECK_HEALTH_WORKERS_MISSING",
    "CHECK_HEALTH_WORKER_READY",
    "CHECK_LIVE_DIFFERS",
    "CHECK_LIVE_ERROR",
    "CHECK_LIVE_FILE_UNREADABLE",
    "CHECK_LIVE_LOST_ON_RESTART",
    "CHECK_LIVE_MATCH",
    "CHECK_LIVE_NO_ENV_FILE",
    "CHECK_LIVE_NO_KNOBS",
    "CHECK_LIVE_NO_PROCESS",
    "CHECK_LIVE_RESTART_NEEDED",
    "CHECK_LIVE_UNSET",
    "LIVE_VERDICT_CODES",
    "is_check_code",
]

# -- config: the env file vs the spec and the last backup ----------------------------------------
#: The spec names no env file (data: ``knobs``, whether the service declares any).
CHECK_CONFIG_NO_ENV_FILE = "config.no_env_file"
#: The env file does not exist (data: ``env_file``).
CHECK_CONFIG_MISSING = "config.missing"
#: The env file does not parse (data: ``env_file``, ``error``: the parser's message).
CHECK_CONFIG_UNREADABLE = "config.unreadable"
#: The env file could not be read on its host (data: ``env_file``, ``error``).
CHECK_CONFIG_ERROR = "config.error"
#: The env file parses and sets no declared knob (data: ``env_file``).
CHECK_CONFIG_NO_KNOBS = "config.no_knobs"
#: A knob's file value equals the spec's pin (data: ``knob, file, spec, backup, backup_path,
#: env_file`` + ``recorded, recorded_change_id``).
CHECK_CONFIG_MATCHES_SPEC = "config.matches_spec"
#: A knob the spec does not pin (same data).
CHECK_CONFIG_NOT_PINNED = "config.not_pinned"
#: A knob's file value differs from the spec's pin: fails (same data).
CHECK_CONFIG_PIN_MISMATCH = "config.pin_mismatch"

# -- live: the running process's environment vs the env file ------------------------------------
#: Reading the process failed (data: ``error``).
CHECK_LIVE_ERROR = "live.error"
#: No process serves the service (data: ``pid`` None, ``pid_source``: how it was looked for).
CHECK_LIVE_NO_PROCESS = "live.no_process"
#: The process runs; no declared knob to compare (data: ``pid, pid_source``).
CHECK_LIVE_NO_KNOBS = "live.no_knobs"
#: The process runs but its env file could not be read (data: ``pid, pid_source``).
CHECK_LIVE_FILE_UNREADABLE = "live.env_file_unreadable"
#: The file-vs-live verdicts of :func:`servelab.core.knobs.rules.live_verdict` (data: ``pid,
# pid_source,
#: knob, file, live, verdict``).
CHECK_LIVE_MATCH = "live.match"
CHECK_LIVE_UNSET = "live.unset"
CHECK_LIVE_RESTART_NEEDED = "live.restart_needed"
CHECK_LIVE_LOST_ON_RESTART = "live.lost_on_restart"
CHECK_LIVE_DIFFERS = "live.differs"
#: No env file: the live value against the spec's pin (data: ``pid, pid_source, knob, live,
#: spec``); fails when it differs from the pin.
CHECK_LIVE_NO_ENV_FILE = "live.no_env_file"

# -- health: readiness endpoints ----------------------------------------------------------------
#: The service's URL could not be reached from here (data: ``error``).
CHECK_HEALTH_ERROR = "health.error"
#: Nothing answered (data: ``path, status`` None, ``elapsed_s, error``).
CHECK_HEALTH_UNREACHABLE = "health.unreachable"
#: A non-2xx answer (data: ``path, status, elapsed_s, body``: its first 160 characters).
CHECK_HEALTH_HTTP_ERROR = "health.http_error"
#: Ready (data: ``path, status, elapsed_s`` + a router's ``healthy_workers, total_workers``).
CHECK_HEALTH_READY = "health.ready"
#: A PD worker is ready; its own health never exercises the KV transfer (same data).
CHECK_HEALTH_WORKER_READY = "health.worker_ready"
#: The router is ready but does not list some of the spec's workers (data: the ready data +
#: ``workers``: per worker service, url, role, listed, healthy; ``missing``: their names).
CHECK_HEALTH_WORKERS_MISSING = "health.workers_missing"

# -- e2e: a streaming chat completion through the entry point -----------------------------------
#: The entry point's URL could not be reached from here (data: ``error``).
CHECK_E2E_ERROR = "e2e.error"
#: The chat completion failed (data: ``status, error, error_detail, ...``; ``error`` None: no
#: content tokens).
CHECK_E2E_FAILED = "e2e.failed"
#: The first request passed, the second probe failed (its timing and error in ``second``).
CHECK_E2E_SECOND_FAILED = "e2e.second_failed"
#: Passed (data: ``model, status, ttft_s, total_s, completion_tokens, prompt_tokens,
#: decode_requests_before, start`` + ``second``).
CHECK_E2E_PASSED = "e2e.passed"
#: xPyD: a request sent through the router reached this worker (data: ``role, via,
#: served_before, served_after, requests_sent, statuses``).
CHECK_E2E_WORKER_REACHED = "e2e.worker_reached"
#: xPyD: no request sent through the router reached this worker (same data).
CHECK_E2E_WORKER_UNREACHED = "e2e.worker_unreached"
#: xPyD: the worker has no served-request counter (not a servelab sim): reach not proven.
CHECK_E2E_WORKER_UNCOUNTED = "e2e.worker_uncounted"

#: A file-vs-live verdict's code.
LIVE_VERDICT_CODES: dict[str, str] = {
    LIVE_MATCH: CHECK_LIVE_MATCH,
    LIVE_UNSET: CHECK_LIVE_UNSET,
    LIVE_RESTART_NEEDED: CHECK_LIVE_RESTART_NEEDED,
    LIVE_LOST_ON_RESTART: CHECK_LIVE_LOST_ON_RESTART,
    LIVE_DIFFERS: CHECK_LIVE_DIFFERS,
}

#: Every code a check can carry.
CHECK_CODES: frozenset[str] = frozenset(
    value
    for name, value in dict(globals()).items()
    if name.startswith("CHECK_") and isinstance(value, str)
)


def is_check_code(text: str | None) -> bool:
    """Whether ``text`` is a check code (else: an older ledger's stored sentence, or nothing)."""
    return text in CHECK_CODES
