"""Knob A/B with live-verified arms.

For each visit of an arm: set the knob in the env file (with a backup), co-restart the service and
its dependents in order, then prove the value is live (config and live layers of ``verify``, and
the value read back from ``/proc/PID/environ``) — an arm that is not live is not measured. Then
benchmark through the router. Arms are interleaved (A B A B ...) so slow drift of the machine
cancels instead of biasing one arm. At the end the original value is restored (unless ``keep``).

Per concurrency the candidate/baseline ratio of output throughput gets a confidence interval and a
verdict (:mod:`servelab.core.compare`); non-monotonic throughput within an arm is an anomaly. The
experiment is recorded in the ledger with the shape the case/restore code reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.compare import Anomaly, Comparison, compare_arms, find_anomalies
from servelab.errors import BenchError, ServelabError
from servelab.io.specfile import LoadedSpec
from servelab.io.store import Ledger
from servelab.ops.bench import BenchConfig, ProgressFn, run_bench
from servelab.ops.deploy import restart
from servelab.ops.knob import diff_knob, get_knob, set_knob
from servelab.ops.verify import verify

__all__ = ["AbConfig", "AbResult", "ArmVisit", "run_ab"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class AbConfig:
    """One knob of one service at two values; ``bench`` is the template for every measurement
    (its ``url`` is replaced by the router's, its ``repeat`` by 1 per visit)."""

    service: str
    knob: str
    baseline: str
    candidate: str
    bench: BenchConfig
    repeat: int = 3
    keep: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "knob": self.knob,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "repeat": self.repeat,
            "keep": self.keep,
            "bench": self.bench.to_dict(),
        }


@dataclass
class ArmVisit:
    """One measurement of one arm: the proof it was live, and throughput per concurrency."""

    arm: str
    round: int
    verification_id: int | None
    live_value: str | None
    throughput: dict[int, float]
    failed_requests: int
    bench_run_ids: list[int] = field(default_factory=list)


@dataclass
class AbResult:
    """Every visit, the comparisons and the anomalies, and where it was recorded."""

    config: AbConfig
    original: str | None
    visits: list[ArmVisit] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    restored: bool = False
    ab_id: int | None = None

    def throughput(self, arm: str) -> dict[int, list[float]]:
        out: dict[int, list[float]] = {}
        for visit in self.visits:
            if visit.arm == arm:
                for conc, thr in visit.throughput.items():
                    out.setdefault(conc, []).append(thr)
        return out

    def to_json(self) -> dict[str, Any]:
        arms = [self.config.baseline, self.config.candidate]
        return {
            "service": self.config.service,
            "knob": self.config.knob,
            "baseline": self.config.baseline,
            "candidate": self.config.candidate,
            "original": self.original,
            "restored": self.restored,
            "arms": [
                {
                    "label": arm,
                    "value": arm,
                    "throughput": {str(c): v for c, v in sorted(self.throughput(arm).items())},
                    "verifications": [v.verification_id for v in self.visits if v.arm == arm],
                }
                for arm in arms
            ],
            "comparisons": [c.to_dict() for c in self.comparisons],
            "anomalies": [a.to_dict() for a in self.anomalies],
            "ab_id": self.ab_id,
        }


def _router_url(loaded: LoadedSpec) -> str:
    name = loaded.spec.router_name or loaded.spec.entry_point
    return loaded.spec.services[name].url


async def _make_live(
    loaded: LoadedSpec,
    cfg: AbConfig,
    value: str | None,
    ledger: Ledger | None,
    say: Say,
    reason: str,
) -> tuple[int | None, str | None]:
    """Set the knob, co-restart, and prove it live end to end; raise when it is not."""
    await set_knob(loaded, cfg.service, cfg.knob, value, reason=reason, ledger=ledger)
    report = await restart(loaded, [cfg.service], verify_after=False, progress=say, ledger=ledger)
    if not report.ok:
        failed = [s.service for s in report.steps if not s.ok]
        raise BenchError(f"restart for arm {value} failed ({', '.join(failed)}): arm not measured")
    # e2e too: it proves the KV path works with this value and pays the cold first request, which
    # would otherwise land in the measurement.
    proof = await verify(loaded, [cfg.service], layers=("config", "live", "e2e"), ledger=ledger)
    live = (await diff_knob(loaded, cfg.service, cfg.knob)).live
    if not proof.ok or live != value:
        reasons = "; ".join(c.detail for c in proof.checks if not c.ok) or f"live value {live!r}"
        raise BenchError(f"arm {cfg.knob}={value} is not live ({reasons}): arm not measured")
    say(f"{cfg.service} {cfg.knob}={value} verified live (verification {proof.verification_id})")
    return proof.verification_id, live


async def _measure(
    loaded: LoadedSpec,
    cfg: AbConfig,
    value: str,
    rnd: int,
    ledger: Ledger | None,
    bench_progress: ProgressFn | None,
) -> ArmVisit:
    label = f"ab {cfg.service} {cfg.knob}={value} round {rnd + 1}"
    bench = replace(cfg.bench, url=_router_url(loaded), repeat=1, label=label)
    result = await run_bench(bench, progress=bench_progress, ledger=ledger)
    run_ids = [r.run_id for r in result.runs if r.run_id is not None]
    # The steady state (every slot busy) when the run had one; else the whole run.
    thr = {
        lvl.concurrency: lvl.steady_throughput.mean
        if lvl.steady_throughput.n
        else lvl.throughput.mean
        for lvl in result.levels
    }
    return ArmVisit(value, rnd, None, None, thr, result.n_failed, run_ids)


async def run_ab(
    loaded: LoadedSpec,
    cfg: AbConfig,
    *,
    ledger: Ledger | None = None,
    progress: Say | None = None,
    bench_progress: ProgressFn | None = None,
) -> AbResult:
    """Run the interleaved A/B; restore the original value unless ``cfg.keep``."""
    say = progress or (lambda _m: None)
    if cfg.baseline == cfg.candidate:
        raise BenchError("the two arms have the same value")
    original = await get_knob(loaded, cfg.service, cfg.knob)
    result = AbResult(cfg, original)
    try:
        for rnd in range(cfg.repeat):
            for value in (cfg.baseline, cfg.candidate):
                say(f"round {rnd + 1}/{cfg.repeat}: arm {cfg.knob}={value}")
                why = f"ab: arm {value}, round {rnd + 1}"
                vid, live = await _make_live(loaded, cfg, value, ledger, say, why)
                visit = await _measure(loaded, cfg, value, rnd, ledger, bench_progress)
                visit.verification_id, visit.live_value = vid, live
                result.visits.append(visit)
    except BaseException:
        # Put the original value back, but never hide why the experiment stopped.
        with contextlib.suppress(ServelabError):
            await _restore(loaded, cfg, original, ledger, say, result)
        raise
    await _restore(loaded, cfg, original, ledger, say, result)
    _conclude(result)
    if ledger is not None:
        result.ab_id = ledger.record_ab(
            service=cfg.service, knob=cfg.knob, config=cfg.to_dict(), result=result.to_json()
        )
    return result


async def _restore(
    loaded: LoadedSpec,
    cfg: AbConfig,
    original: str | None,
    ledger: Ledger | None,
    say: Say,
    result: AbResult,
) -> None:
    if cfg.keep:
        return
    shown = "unset" if original is None else f"={original}"
    say(f"restoring {cfg.service} {cfg.knob} {shown}")
    await _make_live(loaded, cfg, original, ledger, say, "ab: restore the original value")
    result.restored = True


def _conclude(result: AbResult) -> None:
    cfg = result.config
    base, cand = result.throughput(cfg.baseline), result.throughput(cfg.candidate)
    result.comparisons = compare_arms(
        base, cand, baseline_label=cfg.baseline, candidate_label=cfg.candidate
    )
    result.anomalies = find_anomalies(cfg.baseline, base) + find_anomalies(cfg.candidate, cand)
