"""``investigate --symptom slow``: the last recorded baseline, and whether it got slower (pure).

**The baseline** (:func:`find_baseline`) is the newest ``servelab bench`` or ``servelab ab`` of
the deployment recorded in the ledger. A bench: the newest bench run whose URL is the
deployment's entry point or router, not made by an experiment (an A/B's visit, a case's test, an
investigation's own reproduction: their labels say so), with the runs of the same invocation (the
newest levels × repeats runs of the same config; an interrupted run is not counted). An A/B (of
throughput, its runs through the deployment's router): the arm it left live (the value it kept,
else the original it restored; an A/B that left neither arm live is no baseline), its visits'
runs. Its config is the workload the
reproduction replays (its seed moved by :data:`REPRODUCE_SEED_OFFSET`: other prompts, none of
them cached), so the two are the same workload by construction.

**Slower** (:func:`compare_to_baseline`) is decided per concurrency by the A/B's unpaired
analysis (:func:`servelab.core.stats.ratio_interval`, Fieller's 95% interval on the ratio of the
mean values, now over the baseline; :mod:`servelab.core.ab.compare`), each run valued as an A/B
values a visit (its steady state's output tok/s when it had one: :func:`run_value`): ``worse``
when the whole interval is below :data:`SLOWER_BELOW` (0.95: at least 5% slower with 95%
confidence; a smaller loss between two benches run at different times is within what another
process on the machine makes, and is not called slower). A bench run is not paired with the
baseline's runs (they ran at different times), so the A/B's paired analysis does not apply.
Fewer than two runs on a side: ``inconclusive``, never slower.

**Too small to compare** (:func:`usable`): a recorded bench or A/B with fewer than
:data:`MIN_BASELINE_RUNS` values at a level (``servelab bench`` runs once per level unless
``--repeat``), or a bench whose runs measured fewer than :data:`MIN_REQUESTS_PER_SLOT` requests per
slot at its concurrency (``--requests 1``: one request's speed, not the deployment's throughput),
is never the baseline: the newest usable one older than it is, and it is named as skipped
(:class:`SmallBaseline`); with none usable, there is no baseline, and it says why.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from servelab.core.ab.compare import Verdict
from servelab.core.ab.record import AbRunRecord
from servelab.core.ab.result import AbMetric
from servelab.core.bench.record import BenchRunRecord
from servelab.core.load.metrics import RunMetrics
from servelab.core.stats import ratio_interval

__all__ = [
    "EXPERIMENT_LABELS",
    "MIN_BASELINE_RUNS",
    "MIN_REQUESTS_PER_SLOT",
    "REPRODUCE_LABEL",
    "REPRODUCE_SEED_OFFSET",
    "SLOWER_BELOW",
    "Baseline",
    "BaselineSearch",
    "SlowPoint",
    "Slowdown",
    "SmallBaseline",
    "compare_to_baseline",
    "find_baseline",
    "run_throughput",
    "run_value",
    "search_baseline",
    "usable",
]

#: The label of the reproduction's bench runs (never a baseline).
REPRODUCE_LABEL = "investigate: reproduce"
#: Added to the baseline's seed for the reproduction: the same workload (lengths, levels,
#: requests) with other prompts, so none of the baseline's is still in the engines' prefix
#: caches (a replay of the same prompts would be served from cache: faster than it is).
REPRODUCE_SEED_OFFSET = 104_729
#: How the labels of runs an experiment made begin (``ab decode K=512 round 1``, ...).
EXPERIMENT_LABELS = ("ab ", "tune", "case ", "investigate", "bisect")
#: The whole interval of now/baseline below this at a level: slower there (see the docstring).
SLOWER_BELOW = 0.95
#: Values at each level a baseline needs: Fieller's interval needs two on a side.
MIN_BASELINE_RUNS = 2
#: Measured requests per run a bench baseline needs per slot of its concurrency (every slot
#: served at least twice: a throughput, not one request's speed).
MIN_REQUESTS_PER_SLOT = 2
#: Recorded invocations looked at, newest first, for a usable baseline (a bound on the walk).
_MAX_LOOKED_AT = 64
_VERDICTS = {"A>B": Verdict.BETTER, "A<B": Verdict.WORSE, "not significant": Verdict.NO_DIFFERENCE}


@dataclass(frozen=True)
class SmallBaseline:
    """A recorded bench or A/B too small to compare with (:func:`usable`): its runs, when,
    the fewest values at one of its levels, and (a bench) its requests per run and largest
    concurrency (None: unknown, a trace's)."""

    run_ids: tuple[int, ...]
    at: str
    runs: int
    requests: int | None = None
    concurrency: int | None = None
    ab_id: int | None = None


@dataclass(frozen=True)
class Baseline:
    """The runs of one recorded bench (``run_ids``), when (``at``: the first run's time), its
    label, and each concurrency's output throughput (tok/s), one value per run."""

    run_ids: tuple[int, ...]
    at: str
    label: str | None
    throughput: Mapping[int, tuple[float, ...]]
    #: the A/B it was an arm of (None: a bench)
    ab_id: int | None = None
    #: newer recorded benches or A/Bs passed over: too small to compare with
    skipped: tuple[SmallBaseline, ...] = ()

    @property
    def runs(self) -> int:
        """Runs per level (the most at any level)."""
        return max((len(v) for v in self.throughput.values()), default=0)


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
    baseline_ab_id: int | None = None
    #: newer recorded benches or A/Bs passed over: too small to compare with
    skipped: tuple[SmallBaseline, ...] = ()

    @property
    def point(self) -> str:
        """The baseline as a good point (``ab:ID``, or ``run:ID`` its first bench run)."""
        if self.baseline_ab_id is not None:
            return f"ab:{self.baseline_ab_id}"
        return f"run:{self.baseline_ids[0]}"

    @property
    def slower(self) -> bool:
        return any(p.verdict == Verdict.WORSE for p in self.points)

    @property
    def inconclusive(self) -> bool:
        """Not slower, and some level undecided (or none measured on both): neither slower nor
        shown not slower."""
        return not self.slower and (
            not self.points or any(p.verdict == Verdict.INCONCLUSIVE for p in self.points)
        )

    @property
    def lost(self) -> float:
        """The worst ratio among the slower concurrencies (1.0: none slower)."""
        return min((p.ratio for p in self.points if p.verdict == Verdict.WORSE), default=1.0)


def _by_experiment(run: BenchRunRecord) -> bool:
    return (run.label or "").startswith(EXPERIMENT_LABELS)


def _url(run: BenchRunRecord) -> str:
    return str(run.config.get("url", "")).rstrip("/")


def run_value(metrics: RunMetrics) -> float:
    """What a run is compared on, as an A/B values its visits: the steady state's output tok/s
    (every slot busy) when the run had one, else the whole run's."""
    steady = metrics.steady_throughput
    return steady if steady is not None else metrics.output_throughput


def run_throughput(run: BenchRunRecord) -> tuple[int, float] | None:
    """A recorded run's concurrency and value (:func:`run_value`) from its stored summary
    (None: unreadable)."""
    metrics = run.summary.get("metrics")
    conc = run.summary.get("concurrency")
    if not isinstance(metrics, Mapping) or not isinstance(conc, int):
        return None
    steady, whole = metrics.get("steady_throughput"), metrics.get("output_throughput")
    value = steady if isinstance(steady, int | float) else whole
    return (conc, float(value)) if isinstance(value, int | float) else None


def _interrupted(run: BenchRunRecord) -> bool:
    return bool(run.summary.get("interrupted")) or bool(run.summary.get("deadline_hit"))


@dataclass(frozen=True)
class BaselineSearch:
    """The baseline found (None: none usable recorded) and the newer ones too small to use."""

    found: tuple[Baseline, BenchRunRecord] | None
    skipped: tuple[SmallBaseline, ...] = ()


_Found = tuple[Baseline, BenchRunRecord]


def usable(baseline: Baseline, requests: int | None = None) -> SmallBaseline | None:
    """None when ``baseline`` can be compared with; else what it is, too small (the module
    docstring): fewer than :data:`MIN_BASELINE_RUNS` values at a level, or fewer than
    :data:`MIN_REQUESTS_PER_SLOT` ``requests`` per run per slot of its largest level."""
    runs = min((len(v) for v in baseline.throughput.values()), default=0)
    top = max(baseline.throughput, default=None)
    few = requests is not None and top is not None and requests < MIN_REQUESTS_PER_SLOT * top
    if runs >= MIN_BASELINE_RUNS and not few:
        return None
    return SmallBaseline(baseline.run_ids, baseline.at, runs, requests, top, baseline.ab_id)


def search_baseline(
    runs: Sequence[BenchRunRecord], urls: Collection[str], ab_runs: Sequence[AbRunRecord] = ()
) -> BaselineSearch:
    """The newest usable recorded bench or A/B of the deployment at ``urls`` and a run of it
    (its config: the workload), and the newer ones passed over (see the module docstring)."""
    bench, small = _bench_baseline(runs, urls)
    ab, small_ab = _ab_baseline(ab_runs, runs, urls)
    found = max((f for f in (bench, ab) if f), key=lambda f: f[0].at, default=None)
    newer = [s for s in (*small, *small_ab) if found is None or s.at > found[0].at]
    skipped = tuple(sorted(newer, key=lambda s: s.at, reverse=True))
    if found is not None:
        found = (replace(found[0], skipped=skipped), found[1])
    return BaselineSearch(found, skipped)


def find_baseline(
    runs: Sequence[BenchRunRecord], urls: Collection[str], ab_runs: Sequence[AbRunRecord] = ()
) -> _Found | None:
    """:func:`search_baseline`'s baseline (None: none usable recorded)."""
    return search_baseline(runs, urls, ab_runs).found


def _ab_baseline(
    ab_runs: Sequence[AbRunRecord], runs: Sequence[BenchRunRecord], urls: Collection[str]
) -> tuple[_Found | None, list[SmallBaseline]]:
    """The newest usable A/B of throughput through the deployment: the arm it left live."""
    wanted = {u.rstrip("/") for u in urls}
    by_id = {r.id: r for r in runs}
    small: list[SmallBaseline] = []
    for ab in sorted(ab_runs, key=lambda a: a.id, reverse=True)[:_MAX_LOOKED_AT]:
        result = ab.result
        left = result.kept if result.kept is not None else result.original
        if ab.config.get("metric", AbMetric.THROUGHPUT) != AbMetric.THROUGHPUT or left not in (
            result.baseline, result.candidate):  # fmt: skip
            continue
        ids = tuple(i for v in result.visits if v.arm == left for i in v.bench_run_ids)
        mine = [by_id[i] for i in ids if i in by_id and _url(by_id[i]) in wanted]
        if mine:
            throughput = {c: tuple(v) for c, v in sorted(result.throughput(left).items())}
            label = f"A/B #{ab.id} {ab.service} {ab.knob}={left}"
            baseline = Baseline(ids, ab.at, label, throughput, ab.id)
            too_small = usable(baseline)
            if too_small is None:
                return (baseline, mine[0]), small
            small.append(too_small)
    return None, small


def _bench_baseline(
    runs: Sequence[BenchRunRecord], urls: Collection[str]
) -> tuple[_Found | None, list[SmallBaseline]]:
    """The newest usable operator bench of the deployment (one invocation: the newest run and
    the runs of its config before it), and the newer ones too small."""
    wanted = {u.rstrip("/") for u in urls}
    mine = sorted((r for r in runs if _url(r) in wanted and not _by_experiment(r)),
                  key=lambda r: r.id)  # fmt: skip
    small: list[SmallBaseline] = []
    for _ in range(_MAX_LOOKED_AT):
        if not mine:
            break
        newest = mine[-1]
        kept = [r for r in mine if r.config == newest.config][-_runs_of(newest) :]
        baseline = _bench_of(kept, newest.label)
        requests = newest.config.get("requests")
        too_small = usable(baseline, requests if isinstance(requests, int) else None)
        if too_small is None:
            return (baseline, newest), small
        small.append(too_small)
        taken = {r.id for r in kept}
        mine = [r for r in mine if r.id not in taken]
    return None, small


def _bench_of(kept: Sequence[BenchRunRecord], label: str | None) -> Baseline:
    values: dict[int, list[float]] = {}
    for run in kept:
        got = run_throughput(run)
        if got is not None and not _interrupted(run):
            values.setdefault(got[0], []).append(got[1])
    throughput = {c: tuple(v) for c, v in sorted(values.items())}
    return Baseline(tuple(r.id for r in kept), kept[0].at, label, throughput)


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
        if verdict is Verdict.WORSE and not r.high < SLOWER_BELOW:
            verdict = Verdict.NO_DIFFERENCE
        points.append(SlowPoint(conc, r.ratio, r.low, r.high, str(verdict), len(base), len(cur)))
    return Slowdown(baseline.run_ids, baseline.at, baseline.label, tuple(points), baseline.ab_id,
                    baseline.skipped)  # fmt: skip
