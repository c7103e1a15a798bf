"""What an A/B is: :class:`AbConfig`, and the result it starts from (:meth:`AbConfig.result`).

Kept apart from the run loop (:mod:`servelab.ops.ab.ab`) so the journal (resume) and the planner
(:mod:`servelab.ops.ab.plan`) can read it. The config is stored as JSON (the journal, the
``ab_runs`` row's ``config``) through the codec: ``encode(cfg)``, ``decode(AbConfig, data)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator

from servelab.core.ab.design import ORDER_ABBA, Order
from servelab.core.ab.result import CAPACITY_LEVEL, AbDesign, AbMetric, AbResult, Keep
from servelab.core.ab.sequential import DEFAULT_BOUNDARY, Boundary
from servelab.core.answers.contract import AnswersConfig
from servelab.core.bench.contract import BenchConfig
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.load.capacity import PROBE_SPAN_S

__all__ = ["DEFAULT_MAX_ROUNDS", "AbConfig", "KeepOption"]

DEFAULT_MAX_ROUNDS = 10


def _keep_of_older(value: Any) -> Any:
    """A journal written before ``--keep VALUE`` stored a flag: on, it kept the last arm (an
    arbitrary one in a counterbalanced order), read as ``better``; off, as no keep."""
    if isinstance(value, bool):
        return Keep.BETTER.value if value else None
    return value


#: ``--keep``: ``better``, ``baseline``, ``candidate`` or a value (None: restore the original).
KeepOption = Annotated[str | None, BeforeValidator(_keep_of_older)]


@dataclass(frozen=True)
class AbConfig:
    """One knob of one service at two values; ``bench`` is the template for every measurement
    (its ``url`` is replaced by the router's, its ``repeat`` by 1 per visit).

    ``repeat`` rounds (one visit of each arm per round) in the ``order`` scheme (``abba`` or
    ``random`` with ``order_seed``); with ``until_decided`` up to ``max_rounds`` rounds, a
    concurrency leaving the experiment once the confidence sequence decides it (``margin``: the
    equivalence margin, 0.01 for 1%; ``boundary``: ``pocock``, repeated intervals for at most
    ``max_rounds`` looks, or ``lai``, the anytime confidence sequence). ``gpus`` prices a minute
    of the deployment. ``keep``: the value left live at the end instead of the original
    (:func:`~servelab.core.ab.result.kept_value`). ``metric``: what the arms are compared on
    (goodput and capacity need the bench template's SLO; capacity searches within its
    concurrencies, or from its rate)."""

    service: str
    knob: str
    baseline: str
    candidate: str
    bench: BenchConfig
    repeat: int = 3
    keep: KeepOption = None
    order: Order = ORDER_ABBA
    order_seed: int = 0
    until_decided: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    margin: float | None = None
    gpus: int = 1
    boundary: Boundary = DEFAULT_BOUNDARY
    metric: AbMetric = AbMetric.THROUGHPUT
    #: answer probes in every visit (``--answers``; None or mode off: none)
    answers: Annotated[AnswersConfig | None, OMITTED_IF_NONE] = None
    #: a rate capacity search's probe span, seconds (``--probe-s``; None: the default,
    #: :data:`~servelab.core.load.capacity.PROBE_SPAN_S`)
    probe_s: Annotated[float | None, OMITTED_IF_NONE] = None

    def __post_init__(self) -> None:
        # The command line gives plain strings: made codes here (a ValueError names a bad one).
        try:
            object.__setattr__(self, "order", Order(self.order))
        except ValueError:
            raise ValueError(f"unknown order {self.order!r}: one of {', '.join(Order)}") from None
        try:
            object.__setattr__(self, "boundary", Boundary(self.boundary))
        except ValueError:
            raise ValueError(
                f"unknown boundary {self.boundary!r}: one of {', '.join(Boundary)}"
            ) from None
        try:
            object.__setattr__(self, "metric", AbMetric(self.metric))
        except ValueError:
            raise ValueError(
                f"unknown metric {self.metric!r}: one of {', '.join(AbMetric)}"
            ) from None
        if self.metric != AbMetric.THROUGHPUT and self.bench.slo is None:
            raise ValueError(f"an A/B on {self.metric} needs an SLO")
        rate_search = self.metric == AbMetric.CAPACITY and self.bench.rate is not None
        if self.probe_s is not None and not (rate_search and self.probe_s > 0):
            raise ValueError("a probe span goes with an A/B on capacity by rate, above 0 s")

    @property
    def span_s(self) -> float:
        """A rate capacity search's probe span, seconds."""
        return PROBE_SPAN_S if self.probe_s is None else self.probe_s

    @property
    def levels(self) -> tuple[int, ...]:
        """What each visit's values are keyed by: the concurrencies (a trace: its one level),
        or, comparing capacity, :data:`~servelab.core.ab.result.CAPACITY_LEVEL` alone."""
        if self.metric == AbMetric.CAPACITY:
            return (CAPACITY_LEVEL,)
        return self.bench.concurrencies

    @property
    def rounds(self) -> int:
        """The most rounds this A/B may run."""
        return self.max_rounds if self.until_decided else self.repeat

    def result(
        self, original: str | None, *, session_id: int | None = None, resumed: bool = False
    ) -> AbResult:
        """The A/B's result before its first visit: what it compares and how it will run."""
        design = AbDesign(
            order=self.order,
            order_seed=self.order_seed,
            until_decided=self.until_decided,
            max_rounds=self.rounds,
            margin=self.margin,
            boundary=self.boundary,
            concurrencies=self.levels,
            gpus=self.gpus,
            session_id=session_id,
            resumed=resumed,
            metric=None if self.metric == AbMetric.THROUGHPUT else self.metric,
            slo=None if self.bench.slo is None else self.bench.slo.text,
        )
        return AbResult(self.service, self.knob, self.baseline, self.candidate, original,
                        design=design)  # fmt: skip
