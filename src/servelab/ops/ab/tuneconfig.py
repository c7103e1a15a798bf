"""A tune's config (``TuneConfig``: its knobs and values, the measurement's template, the metric
and the rule's settings; stored through the codec for ``--resume``) and the one check of its knobs
and values before anything runs (:func:`check_tune`). :mod:`servelab.ops.ab.tune` runs it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

from servelab.core.ab.factorial import Design, screening_design
from servelab.core.ab.result import CAPACITY_LEVEL
from servelab.core.ab.screenrun import Screening, screen_factors
from servelab.core.ab.sequential import DEFAULT_BOUNDARY, Boundary
from servelab.core.ab.tune import ORDER_WILLIAMS, TUNE_ORDERS, TuneRule
from servelab.core.ab.tunerun import MAX_ARMS, TuneKnob, TuneMetric, TuneRecord, arm_count, grid
from servelab.core.answers.contract import AnswersConfig
from servelab.core.bench.contract import BenchConfig
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knob import same_value
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load.capacity import PROBE_SPAN_S
from servelab.errors import KnobError
from servelab.ops.arm import Setting
from servelab.ops.knob import check_setting

__all__ = ["DEFAULT_MAX_ROUNDS", "TuneConfig", "check_tune"]

DEFAULT_MAX_ROUNDS = 12


@dataclass(frozen=True)
class TuneConfig:
    """The knobs and their values, the measurement's template ``bench`` (its ``url`` replaced by
    the router's, its ``repeat`` by 1 per visit; its concurrencies are the levels), the metric,
    and the rule's settings: family-wise ``alpha``, the ``margin`` (0.05: 5%), ``max_rounds``
    blocks, ``max_minutes`` of visits, the ``boundary`` and the ``order`` with its seed. ``gpus``
    prices a minute; ``keep_best`` leaves the best arm live; ``screen`` screens the knobs first
    (each at exactly two values, its low one first). Stored through the codec."""

    knobs: tuple[TuneKnob, ...]
    bench: BenchConfig
    metric: TuneMetric = TuneMetric.THROUGHPUT
    alpha: float = 0.05
    margin: float = 0.05
    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_minutes: float | None = None
    boundary: Boundary = DEFAULT_BOUNDARY
    order: str = ORDER_WILLIAMS
    order_seed: int = 0
    gpus: int = 1
    keep_best: bool = False
    screen: bool = False
    #: answer probes in every visit of the tune's blocks (``--answers``; None: none)
    answers: Annotated[AnswersConfig | None, OMITTED_IF_NONE] = None
    #: a rate capacity search's probe span, seconds (``--probe-s``; None: the default,
    #: :data:`~servelab.core.load.capacity.PROBE_SPAN_S`)
    probe_s: Annotated[float | None, OMITTED_IF_NONE] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "metric", TuneMetric(self.metric))
        if self.metric != TuneMetric.THROUGHPUT and self.bench.slo is None:
            raise ValueError(f"a tune on {self.metric} needs an SLO")
        rate_search = self.metric == TuneMetric.CAPACITY and self.bench.rate is not None
        if self.probe_s is not None and not (rate_search and self.probe_s > 0):
            raise ValueError("a probe span goes with a tune on capacity by rate, above 0 s")
        object.__setattr__(self, "boundary", Boundary(self.boundary))
        if not self.knobs:
            raise ValueError("a tune needs a knob")
        if arm_count(len(k.values) for k in self.knobs) > MAX_ARMS:  # counted, never built
            raise ValueError(f"a tune takes at most {MAX_ARMS} arms (the product of the knobs' "
                             "value counts)")  # fmt: skip
        if len({(k.service, k.knob) for k in self.knobs}) != len(self.knobs):
            raise ValueError("each knob once")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError("max_minutes must be > 0")
        if self.order not in TUNE_ORDERS:
            raise ValueError(f"unknown order {self.order!r}: one of {', '.join(TUNE_ORDERS)}")
        self.rule()  # the rule's own checks (alpha, margin, max_rounds)
        if self.screen:
            self.design()  # each knob at two values, at most 8, their names distinct

    @property
    def span_s(self) -> float:
        """A rate capacity search's probe span, seconds."""
        return PROBE_SPAN_S if self.probe_s is None else self.probe_s

    def rule(self) -> TuneRule:
        return TuneRule(self.alpha, self.margin, self.max_rounds, self.boundary, self.order,
                        self.order_seed)  # fmt: skip

    def design(self) -> Design:
        """The screening design of the knobs (``screen``), each knob a factor by its name."""
        return screening_design(screen_factors([(k.knob, k.values) for k in self.knobs]))

    @property
    def levels(self) -> tuple[int, ...]:
        """What each visit's values are keyed by: the concurrencies, or, tuning capacity,
        :data:`~servelab.core.ab.result.CAPACITY_LEVEL` alone (one search per visit)."""
        if self.metric == TuneMetric.CAPACITY:
            return (CAPACITY_LEVEL,)
        return self.bench.concurrencies

    @property
    def names(self) -> str:
        """The knobs as a listing shows them: ``decode:NAME,decode:--x``."""
        return ",".join(f"{k.service}:{k.knob}" for k in self.knobs)

    def record(
        self, original: tuple[str | None, ...], *, tune_id: int | None, resumed: bool = False
    ) -> TuneRecord:
        """The tune before its first visit (screened: its arms come with the follow-up)."""
        screening = Screening(self.design()) if self.screen else None
        return TuneRecord(self.knobs, () if self.screen else grid(self.knobs), self.metric,
                          self.levels, self.rule(), gpus=self.gpus, max_minutes=self.max_minutes,
                          original=original, tune_id=tune_id, resumed=resumed,
                          slo=None if self.bench.slo is None else self.bench.slo.text,
                          screening=screening)  # fmt: skip

    def settings(self, values: tuple[str | None, ...]) -> list[Setting]:
        """The knobs at ``values`` (in the knobs' order)."""
        return [Setting(k.service, k.knob, v) for k, v in zip(self.knobs, values, strict=True)]


def check_tune(spec: DeploymentSpec, cfg: TuneConfig) -> TuneConfig:
    """The one check of a tune's knobs and values before anything runs, for ``tune``, ``tune
    --plan`` and ``tune --resume`` alike: every service and knob declared, every value one the
    knob takes (:func:`~servelab.ops.knob.check_setting`), each stored the way the knob stores
    it (a flag's ``true`` is ``on``), and no two values of a knob one setting (``on,true`` and
    ``256,0256`` are one arm each, not two). The config with its values as stored, else
    SpecError or KnobError (exit 2)."""
    knobs = []
    for k in cfg.knobs:
        stored = [check_setting(spec, k.service, k.knob, v) or "" for v in k.values]
        for i, value in enumerate(stored):
            earlier = [j for j in range(i) if same_value(stored[j], value)]
            if earlier:  # ``on`` and ``true``, ``256`` and ``0256``: one setting
                first = k.values[earlier[0]]
                raise KnobError(f"{k.service}:{k.knob}: {first!r} and {k.values[i]!r} are one "
                                f"setting ({value}): each value once")  # fmt: skip
        knobs.append(TuneKnob(k.service, k.knob, tuple(stored)))
    return replace(cfg, knobs=tuple(knobs))
