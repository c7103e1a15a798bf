"""Knob A/B with live-verified arms.

For each visit of an arm: set the knob in the env file (with a backup), co-restart the service and
its dependents in order, then prove the value is live (config and live layers of ``verify``, and
the value read back from ``/proc/PID/environ``) — an arm that is not live is not measured. Then
benchmark through the router. Arms are interleaved (A B A B ...) so slow drift of the machine
cancels instead of biasing one arm. At the end the original value is restored (unless ``keep``).

Per concurrency the candidate/baseline ratio of output throughput gets a confidence interval and a
verdict (:mod:`servelab.core.compare`); non-monotonic throughput within an arm is an anomaly. The
experiment is recorded in the ledger with the shape the case/restore code reads.

The whole experiment is one :class:`~servelab.ops.context.Operation`: every visit's set, restart,
verify and live read-back go through the same hosts (one SSH connection per host for the run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from servelab.core.compare import Anomaly, Comparison, compare_arms, find_anomalies
from servelab.core.results import AbArm, AbResultRecord, AnomalyRecord, ComparisonRecord
from servelab.errors import BenchError, ServelabError
from servelab.io.ledger import Ledger
from servelab.ops.bench import BenchConfig, BenchProgressFn, run_bench
from servelab.ops.context import Operation, SpecOrOperation, operation
from servelab.ops.deploy import restart
from servelab.ops.knob import get_knob, live_knob, set_knob
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

    def record(self) -> AbResultRecord:
        """The stored shape of this A/B (what the ledger records and ``ab --json`` prints)."""
        arms = tuple(
            AbArm(
                arm,
                {str(c): tuple(v) for c, v in sorted(self.throughput(arm).items())},
                tuple(v.verification_id for v in self.visits if v.arm == arm),
            )
            for arm in (self.config.baseline, self.config.candidate)
        )
        return AbResultRecord(
            service=self.config.service,
            knob=self.config.knob,
            baseline=self.config.baseline,
            candidate=self.config.candidate,
            original=self.original,
            restored=self.restored,
            arms=arms,
            comparisons=tuple(ComparisonRecord.from_json(c.to_dict()) for c in self.comparisons),
            anomalies=tuple(AnomalyRecord.from_json(a.to_dict()) for a in self.anomalies),
            ab_id=self.ab_id,
        )

    def to_json(self) -> dict[str, Any]:
        return self.record().to_json()


def _router_url(op: Operation) -> str:
    name = op.spec.router_name or op.spec.entry_point
    return op.spec.services[name].url


async def _make_live(
    op: Operation, cfg: AbConfig, value: str | None, reason: str
) -> tuple[int | None, str | None]:
    """Set the knob, co-restart, and prove it live end to end; raise when it is not."""
    await set_knob(op, cfg.service, cfg.knob, value, reason=reason)
    report = await restart(op, [cfg.service], verify_after=False)
    if not report.ok:
        failed = [s.service for s in report.steps if not s.ok]
        raise BenchError(f"restart for arm {value} failed ({', '.join(failed)}): arm not measured")
    # e2e too: it proves the KV path works with this value and pays the cold first request, which
    # would otherwise land in the measurement.
    proof = await verify(op.quiet(), [cfg.service], layers=("config", "live", "e2e"))
    live = await live_knob(op, cfg.service, cfg.knob)  # read back from /proc/PID/environ
    if not proof.ok or live != value:
        failed = [f"{c.layer} {c.service}: {c.code}" for c in proof.failures]
        reasons = "; ".join(failed) or f"live value {live!r}"
        raise BenchError(f"arm {cfg.knob}={value} is not live ({reasons}): arm not measured")
    op.say(f"{cfg.service} {cfg.knob}={value} verified live (verification {proof.verification_id})")
    return proof.verification_id, live


async def _measure(
    op: Operation, cfg: AbConfig, value: str, rnd: int, bench_progress: BenchProgressFn | None
) -> ArmVisit:
    label = f"ab {cfg.service} {cfg.knob}={value} round {rnd + 1}"
    bench = replace(cfg.bench, url=_router_url(op), repeat=1, label=label)
    result = await run_bench(bench, progress=bench_progress, ledger=op.ledger)
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
    target: SpecOrOperation,
    cfg: AbConfig,
    *,
    ledger: Ledger | None = None,
    progress: Say | None = None,
    bench_progress: BenchProgressFn | None = None,
) -> AbResult:
    """Run the interleaved A/B; restore the original value unless ``cfg.keep``."""
    if cfg.baseline == cfg.candidate:
        raise BenchError("the two arms have the same value")
    async with operation(target, ledger=ledger, progress=progress) as op:
        original = await get_knob(op, cfg.service, cfg.knob)
        result = AbResult(cfg, original)
        try:
            await _visits(op, cfg, result, bench_progress)
        except BaseException:
            # Put the original value back, but never hide why the experiment stopped.
            with contextlib.suppress(ServelabError):
                await _restore(op, cfg, original, result)
            raise
        await _restore(op, cfg, original, result)
        _conclude(result)
        if op.ledger is not None:
            result.ab_id = op.ledger.record_ab(
                service=cfg.service, knob=cfg.knob, config=cfg.to_dict(), result=result.record()
            )
    return result


async def _visits(
    op: Operation, cfg: AbConfig, result: AbResult, bench_progress: BenchProgressFn | None
) -> None:
    """Every round: each arm set, proven live, then measured (A B A B ...)."""
    for rnd in range(cfg.repeat):
        for value in (cfg.baseline, cfg.candidate):
            op.say(f"round {rnd + 1}/{cfg.repeat}: arm {cfg.knob}={value}")
            why = f"ab: arm {value}, round {rnd + 1}"
            vid, live = await _make_live(op, cfg, value, why)
            visit = await _measure(op, cfg, value, rnd, bench_progress)
            visit.verification_id, visit.live_value = vid, live
            result.visits.append(visit)


async def _restore(op: Operation, cfg: AbConfig, original: str | None, result: AbResult) -> None:
    if cfg.keep:
        return
    shown = "unset" if original is None else f"={original}"
    op.say(f"restoring {cfg.service} {cfg.knob} {shown}")
    await _make_live(op, cfg, original, "ab: restore the original value")
    result.restored = True


def _conclude(result: AbResult) -> None:
    cfg = result.config
    base, cand = result.throughput(cfg.baseline), result.throughput(cfg.candidate)
    result.comparisons = compare_arms(
        base, cand, baseline_label=cfg.baseline, candidate_label=cfg.candidate
    )
    result.anomalies = find_anomalies(cfg.baseline, base) + find_anomalies(cfg.candidate, cand)
