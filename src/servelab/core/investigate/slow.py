"""``investigate --symptom slow``: the last recorded baseline, and whether it got slower (pure).

**The baseline** (:func:`find_baseline`) is the newest ``servelab bench`` of the deployment
recorded in the ledger: the newest bench run whose URL is the deployment's entry point or router,
not made by an experiment (an A/B's visit, a case's test, an investigation's own reproduction:
their labels say so), with the runs of the same invocation (the newest levels × repeats runs
of the same config; an interrupted run is not counted). Its config is the workload the
reproduction replays (its seed moved by :data:`REPRODUCE_SEED_OFFSET`: other prompts, none of
them cached), so the two are the same workload by construction.

**Slower** (:func:`compare_to_baseline`) is decided per concurrency by the A/B's unpaired
analysis (:func:`servelab.core.stats.ratio_interval`, Fieller's interval on the ratio of mean
output throughputs, now over the baseline, 95%; :mod:`servelab.core.ab.compare`): ``worse``
when the whole interval is below 1. A bench run is not paired with the baseline's runs (they ran
at different times), so the A/B's paired analysis does not apply. Fewer than two runs on a side:
``inconclusive``, never slower.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from servelab.core.ab.compare import Verdict
from servelab.core.bench.record import BenchRunRecord
from servelab.core.stats import ratio_interval

__all__ = [
    "EXPERIMENT_LABELS",
    "REPRODUCE_LABEL",
    "REPRODUCE_SEED_OFFSET",
    "Baseline",
    "SlowPoint",
    "Slowdown",
    "compare_to_baseline",
    "find_baseline",
    "run_throughput",
]

#: The label of the reproduction's bench runs (never a baseline).
REPRODUCE_LABEL = "investigate: reproduce"
#: Added to the baseline's seed for the reproduction: the same workload (lengths, levels,
#: requests) with other prompts, so none of the baseline's is still in the engines' prefix
#: caches (a replay of the same prompts would be served from cache: faster than it is).
REPRODUCE_SEED_OFFSET = 104_729
#: How the labels of runs an experiment made begin (``ab decode K=512 round 1``, ...).
EXPERIMENT_LABELS = ("ab ", "tune", "case ", "investigate", "bisect")
_VERDICTS = {"A>B": Verdict.BETTER, "A<B": Verdict.WORSE, "not significant": Verdict.NO_DIFFERENCE}


@dataclass(frozen=True)
class Baseline:
    """The runs of one recorded bench (``run_ids``), when (``at``: the first run's time), its
    label, and each concurrency's output throughput (tok/s), one value per run."""

    run_ids: tuple[int, ...]
    at: str
    label: str | None
    throughput: Mapping[int, tuple[float, ...]]


@dataclass(frozen=True)
class SlowPoint:
    """One concurrency: now over the baseline (``ratio``), its interval, the verdict, n each."""

    concurrency: int
    ratio: float
    low: float
    high: float
    verdict: str
    n_baseline: int
    n_now: int


@dataclass(frozen=True)
class Slowdown:
    """The reproduction against ``baseline``: each concurrency's comparison; ``slower`` when
    one is ``worse``."""

    baseline_ids: tuple[int, ...]
    baseline_at: str
    baseline_label: str | None
    points: tuple[SlowPoint, ...]

    @property
    def slower(self) -> bool:
        return any(p.verdict == Verdict.WORSE for p in self.points)

    @property
    def lost(self) -> float:
        """The worst ratio among the slower concurrencies (1.0: none slower)."""
        return min((p.ratio for p in self.points if p.verdict == Verdict.WORSE), default=1.0)


def _by_experiment(run: BenchRunRecord) -> bool:
    return (run.label or "").startswith(EXPERIMENT_LABELS)


def _url(run: BenchRunRecord) -> str:
    return str(run.config.get("url", "")).rstrip("/")


def run_throughput(run: BenchRunRecord) -> tuple[int, float] | None:
    """A run's concurrency and output throughput from its stored summary (None: unreadable)."""
    metrics = run.summary.get("metrics")
    conc = run.summary.get("concurrency")
    if not isinstance(metrics, Mapping) or not isinstance(conc, int):
        return None
    value = metrics.get("output_throughput")
    return (conc, float(value)) if isinstance(value, int | float) else None


def _interrupted(run: BenchRunRecord) -> bool:
    return bool(run.summary.get("interrupted")) or bool(run.summary.get("deadline_hit"))


def find_baseline(
    runs: Sequence[BenchRunRecord], urls: Collection[str]
) -> tuple[Baseline, BenchRunRecord] | None:
    """The newest recorded bench of the deployment at ``urls`` and its newest run (its config:
    the workload; see the module docstring); None: none recorded."""
    wanted = {u.rstrip("/") for u in urls}
    mine = sorted((r for r in runs if _url(r) in wanted and not _by_experiment(r)),
                  key=lambda r: r.id)  # fmt: skip
    if not mine:
        return None
    newest = mine[-1]
    kept = [r for r in mine if r.config == newest.config][-_runs_of(newest) :]
    values: dict[int, list[float]] = {}
    for run in kept:
        got = run_throughput(run)
        if got is not None and not _interrupted(run):
            values.setdefault(got[0], []).append(got[1])
    throughput = {c: tuple(v) for c, v in sorted(values.items())}
    return Baseline(tuple(r.id for r in kept), kept[0].at, newest.label, throughput), newest


def _runs_of(run: BenchRunRecord) -> int:
    """How many runs one invocation of this run's config made (its levels × its repeats)."""
    levels = run.config.get("concurrencies") or (1,)
    repeat = run.config.get("repeat") or 1
    return max(1, len(levels) * int(repeat))


def compare_to_baseline(
    baseline: Baseline, now: Mapping[int, Sequence[float]], *, confidence: float = 0.95
) -> Slowdown:
    """Each concurrency of both: Fieller's interval on mean(now) / mean(baseline)."""
    points = []
    for conc in sorted(set(baseline.throughput) & set(now)):
        base, cur = list(baseline.throughput[conc]), list(now[conc])
        r = ratio_interval(cur, base, confidence=confidence)
        verdict = _VERDICTS.get(r.verdict, Verdict.INCONCLUSIVE)
        points.append(SlowPoint(conc, r.ratio, r.low, r.high, str(verdict), len(base), len(cur)))
    return Slowdown(baseline.run_ids, baseline.at, baseline.label, tuple(points))
