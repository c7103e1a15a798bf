"""Fault switches of the simulated engine: each one of the reference incident's suspects.

- ``transfer_fail_prob``: a KV transfer fails (decode answers 500, counted in
  ``sglang:num_transfer_failed_reqs_total``), like SGLang's ``DISAGGREGATION_TEST_FAILURE_PROB``.
- ``abort_wedge`` ``(N, T)``: after N client aborts within T seconds the decode's transfer path
  wedges: new requests hang in WaitingForInput, running requests stop, ``/health`` stays 200.
- ``corrupt_under_load`` ``X``: above X concurrent decode requests, tool-call arguments come out as
  broken JSON.
- ``slow_start_s``: ``/health`` answers 503 that many (wall) seconds longer after start.
- ``transfer_fail_over_tokens`` ``N``: every KV transfer of a prompt over N tokens fails (a
  deterministic ``transfer_fail_prob``; 0 = every transfer).
- ``wedge``: the decode is wedged now (like a tripped ``abort_wedge``), until switched off.
- ``no_metrics``: ``/metrics`` answers 404 (an engine without a metrics endpoint).
- ``fail_fast_s`` ``S``: for S wall seconds from when it is set (or from start), every generation
  request is answered 500 at once (what opens the router's circuit breaker for this worker).
- ``batch_nondeterminism`` ``RATE``: each greedy token the decode emits in a step over B running
  requests takes its second choice with probability ``RATE * B / 64`` (``servelab.sim.answers``).
- ``kv_corrupt``: the decode continues from wrong KV after a PD hand-off (SGLang bootstrap room,
  vLLM NIXL read): HTTP 200, a valid stream, an answer that differs from its first decoded token.
- ``scheduler_crash``: the scheduler loop raises at its next step; the worker then does what the
  engine does when its scheduler process dies (``servelab.sim.app``: logged, 503, exit 1).
- ``kv_leak`` ``RATE``: a slow leak on the decode: after each KV hand-off, with probability RATE (a
  seeded draw), a ghost of the request is left in the transfer queue, waiting for remote KV that
  never comes, holding the request's KV pages (``servelab.sim.leak``): the client's answer is
  fine, ``sglang:token_usage`` and ``sglang:num_decode_transfer_queue_reqs`` never come back down.

Pure data and rules; the clock and the random draws are passed in.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from servelab.errors import SimError

__all__ = ["ENV_VARS", "AbortTracker", "Faults", "parse_flag", "parse_wedge"]

ENV_VARS = {
    "transfer_fail_prob": "SERVELAB_SIM_TRANSFER_FAIL_PROB",
    "abort_wedge": "SERVELAB_SIM_ABORT_WEDGE",
    "corrupt_under_load": "SERVELAB_SIM_CORRUPT_UNDER_LOAD",
    "slow_start_s": "SERVELAB_SIM_SLOW_START_S",
    "transfer_fail_over_tokens": "SERVELAB_SIM_TRANSFER_FAIL_OVER_TOKENS",
    "wedge": "SERVELAB_SIM_WEDGE",
    "no_metrics": "SERVELAB_SIM_NO_METRICS",
    "fail_fast_s": "SERVELAB_SIM_FAIL_FAST_S",
    "batch_nondeterminism": "SERVELAB_SIM_BATCH_NONDETERMINISM",
    "kv_corrupt": "SERVELAB_SIM_KV_CORRUPT",
    "scheduler_crash": "SERVELAB_SIM_SCHEDULER_CRASH",
    "kv_leak": "SERVELAB_SIM_KV_LEAK",
}

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def parse_flag(name: str, value: Any) -> bool:
    """A boolean switch from JSON (``true``/``false``/``null``) or env text (``1``/``0``, ...)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SimError(f"{name} must be true or false, got {value!r}")


def parse_wedge(value: Any) -> tuple[int, float] | None:
    """``"N/T"`` (or ``[N, T]``, or ``None``/``""``) into ``(N, T)``."""
    if value is None or value == "" or value == "off":
        return None
    try:
        if isinstance(value, str):
            n_text, t_text = value.split("/", 1)
            n, t = int(n_text), float(t_text)
        else:
            n, t = int(value[0]), float(value[1])
    except (ValueError, TypeError, IndexError) as exc:
        raise SimError(f"abort_wedge must be 'N/T' (aborts/seconds), got {value!r}") from exc
    if n < 1 or t <= 0:
        raise SimError(f"abort_wedge needs N >= 1 and T > 0, got {value!r}")
    return n, t


def _prob(value: Any, name: str = "transfer_fail_prob") -> float:
    try:
        p = float(value)
    except (TypeError, ValueError) as exc:
        raise SimError(f"{name} must be a number, got {value!r}") from exc
    if not 0.0 <= p <= 1.0:
        raise SimError(f"{name} must be within [0, 1], got {p}")
    return p


def _opt_int(name: str, value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise SimError(f"{name} must be an integer, got {value!r}") from exc


def _non_negative(name: str, value: Any) -> float:
    if value is None:
        return 0.0
    try:
        x = float(value)
    except (TypeError, ValueError) as exc:
        raise SimError(f"{name} must be a number, got {value!r}") from exc
    if not x >= 0 or x == float("inf"):
        raise SimError(f"{name} must be a finite number >= 0, got {x}")
    return x


@dataclass(frozen=True)
class Faults:
    """The fault switches in effect. All off by default."""

    transfer_fail_prob: float = 0.0
    abort_wedge: tuple[int, float] | None = None
    corrupt_under_load: int | None = None
    slow_start_s: float = 0.0
    transfer_fail_over_tokens: int | None = None
    wedge: bool = False
    no_metrics: bool = False
    fail_fast_s: float = 0.0
    batch_nondeterminism: float = 0.0
    kv_corrupt: bool = False
    scheduler_crash: bool = False
    kv_leak: float = 0.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Faults:
        """Read the ``SERVELAB_SIM_*`` fault variables (the process env by default)."""
        source = os.environ if env is None else env
        values = {k: source[v] for k, v in ENV_VARS.items() if source.get(v, "") != ""}
        return cls().updated(values)

    def updated(self, changes: Mapping[str, Any]) -> Faults:
        """A copy with ``changes`` applied (JSON from the admin API or CLI flags); validates."""
        unknown = set(changes) - set(ENV_VARS)
        if unknown:
            raise SimError(f"unknown fault(s): {', '.join(sorted(unknown))}")
        new: dict[str, Any] = {}
        if "transfer_fail_prob" in changes:
            new["transfer_fail_prob"] = _prob(changes["transfer_fail_prob"])
        if "kv_leak" in changes:
            new["kv_leak"] = _prob(changes["kv_leak"], "kv_leak")
        if "abort_wedge" in changes:
            new["abort_wedge"] = parse_wedge(changes["abort_wedge"])
        if "corrupt_under_load" in changes:
            new["corrupt_under_load"] = _opt_int(
                "corrupt_under_load", changes["corrupt_under_load"]
            )
        for name in ("slow_start_s", "fail_fast_s", "batch_nondeterminism"):
            if name in changes:
                new[name] = _non_negative(name, changes[name])
        if "transfer_fail_over_tokens" in changes:
            over = _opt_int("transfer_fail_over_tokens", changes["transfer_fail_over_tokens"])
            if over is not None and over < 0:
                raise SimError(f"transfer_fail_over_tokens must be >= 0, got {over}")
            new["transfer_fail_over_tokens"] = over
        for name in ("wedge", "no_metrics", "kv_corrupt", "scheduler_crash"):
            if name in changes:
                new[name] = parse_flag(name, changes[name])
        return replace(self, **new)

    def transfer_fails(self, draw: float, prompt_tokens: int = 0) -> bool:
        """Whether a transfer fails, given a uniform draw in [0, 1) from a seeded generator
        and the prompt's length (``transfer_fail_over_tokens`` fails it whatever the draw)."""
        over = self.transfer_fail_over_tokens
        return draw < self.transfer_fail_prob or (over is not None and prompt_tokens > over)

    def corrupts(self, concurrency: int) -> bool:
        """Whether tool-call arguments come out broken at this decode concurrency."""
        return self.corrupt_under_load is not None and concurrency > self.corrupt_under_load

    def as_json(self) -> dict[str, Any]:
        """JSON-friendly view (``abort_wedge`` as ``"N/T"``)."""
        data = asdict(self)
        wedge = self.abort_wedge
        data["abort_wedge"] = f"{wedge[0]}/{wedge[1]:g}" if wedge else None
        return data


@dataclass
class AbortTracker:
    """Counts client aborts in a sliding window; wedges for good once N fall within T seconds."""

    times: deque[float] = field(default_factory=deque)
    total: int = 0
    wedged_at: float | None = None

    def record(self, now: float, wedge: tuple[int, float] | None) -> bool:
        """Record one abort at ``now`` (seconds); returns whether the path is now wedged."""
        self.total += 1
        self.times.append(now)
        if wedge is not None and self.wedged_at is None:
            n, window = wedge
            while self.times and now - self.times[0] > window:
                self.times.popleft()
            if len(self.times) >= n:
                self.wedged_at = now
        return self.wedged_at is not None

    @property
    def wedged(self) -> bool:
        """Whether the transfer path is wedged."""
        return self.wedged_at is not None

    def reset(self) -> None:
        """Unwedge (the admin API does this when ``abort_wedge`` is switched off)."""
        self.times.clear()
        self.wedged_at = None
