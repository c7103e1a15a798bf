"""What an A/B is and what it found: :class:`AbConfig`, :class:`ArmVisit`, :class:`AbResult`.

Kept apart from the run loop (:mod:`servelab.ops.ab.ab`) so the journal (resume) and the planner
(:mod:`servelab.ops.ab.plan`) can read and rebuild them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servelab.core.ab.compare import Anomaly, Comparison
from servelab.core.ab.crosscheck import ServerDisagreement, disagreements, server_ratios
from servelab.core.ab.design import ORDER_ABBA, ORDERS, DesignCost, VisitCost
from servelab.core.ab.sequential import BOUNDARIES, DEFAULT_BOUNDARY, looks_for
from servelab.core.ledger.results import AbArm, AbResultRecord, AnomalyRecord, ComparisonRecord
from servelab.core.load.metrics import SLO
from servelab.core.load.workload import LengthDist
from servelab.ops.bench.bench import BenchConfig

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "STOP_DECIDED",
    "STOP_FIXED",
    "STOP_MAX_ROUNDS",
    "AbConfig",
    "AbResult",
    "ArmVisit",
    "bench_from_dict",
]

DEFAULT_MAX_ROUNDS = 10
STOP_FIXED = "fixed design"
STOP_DECIDED = "every concurrency decided"
STOP_MAX_ROUNDS = "max rounds reached"


@dataclass(frozen=True)
class AbConfig:
    """One knob of one service at two values; ``bench`` is the template for every measurement
    (its ``url`` is replaced by the router's, its ``repeat`` by 1 per visit).

    ``repeat`` rounds (one visit of each arm per round) in the ``order`` scheme (``abba`` or
    ``random`` with ``order_seed``); with ``until_decided`` up to ``max_rounds`` rounds, a
    concurrency leaving the experiment once the confidence sequence decides it (``margin``: the
    equivalence margin, 0.01 for 1%; ``boundary``: ``pocock``, repeated intervals for at most
    ``max_rounds`` looks, or ``lai``, the anytime confidence sequence). ``gpus`` prices a minute
    of the deployment."""

    service: str
    knob: str
    baseline: str
    candidate: str
    bench: BenchConfig
    repeat: int = 3
    keep: bool = False
    order: str = ORDER_ABBA
    order_seed: int = 0
    until_decided: bool = False
    max_rounds: int = DEFAULT_MAX_ROUNDS
    margin: float | None = None
    gpus: int = 1
    boundary: str = DEFAULT_BOUNDARY

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}: one of {', '.join(ORDERS)}")
        if self.boundary not in BOUNDARIES:
            raise ValueError(f"unknown boundary {self.boundary!r}: one of {', '.join(BOUNDARIES)}")

    @property
    def looks(self) -> int | None:
        """The most looks the stopping rule's interval covers (None: any number, Lai's)."""
        return looks_for(self.boundary, self.rounds)

    @property
    def rounds(self) -> int:
        """The most rounds this A/B may run."""
        return self.max_rounds if self.until_decided else self.repeat

    def to_dict(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "knob": self.knob,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "repeat": self.repeat,
            "keep": self.keep,
            "order": self.order,
            "order_seed": self.order_seed,
            "until_decided": self.until_decided,
            "max_rounds": self.max_rounds,
            "margin": self.margin,
            "gpus": self.gpus,
            "boundary": self.boundary,
            "bench": self.bench.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AbConfig:
        """The config :meth:`to_dict` wrote (what ``ab --resume`` reads from the journal)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"bench"}
        kwargs = {k: v for k, v in data.items() if k in names}
        return cls(bench=bench_from_dict(data["bench"]), **kwargs)


def bench_from_dict(data: Mapping[str, Any]) -> BenchConfig:
    """A :class:`BenchConfig` from its ``to_dict`` (fields this version does not know ignored)."""
    names = {f.name for f in dataclasses.fields(BenchConfig)}
    kwargs = {k: v for k, v in data.items() if k in names}
    for key in ("input_len", "output_len"):
        if isinstance(kwargs.get(key), Mapping):
            kwargs[key] = LengthDist(**kwargs[key])
    if isinstance(kwargs.get("slo"), Mapping):
        kwargs["slo"] = SLO(**kwargs["slo"])
    if "concurrencies" in kwargs:
        kwargs["concurrencies"] = tuple(kwargs["concurrencies"])
    return BenchConfig(**kwargs)


@dataclass
class ArmVisit:
    """One measurement of one arm: the proof it was live, and throughput per concurrency.

    ``position`` is its place in the visit plan, ``order`` its round's order (``256→512``);
    ``overhead_s`` the set + restart + verify time, ``bench_s`` each concurrency's run time."""

    arm: str
    round: int
    verification_id: int | None
    live_value: str | None
    throughput: dict[int, float]
    failed_requests: int
    bench_run_ids: list[int] = field(default_factory=list)
    position: int = 0
    order: str = ""
    overhead_s: float = 0.0
    bench_s: dict[int, float] = field(default_factory=dict)
    #: output tok/s the decodes' own counters gave per concurrency (whole run; absent: unknown)
    server_throughput: dict[int, float] = field(default_factory=dict)

    @property
    def cost(self) -> VisitCost:
        return VisitCost(self.overhead_s, dict(self.bench_s))

    def to_json(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "round": self.round,
            "position": self.position,
            "order": self.order,
            "verification_id": self.verification_id,
            "live_value": self.live_value,
            "throughput": {str(c): v for c, v in self.throughput.items()},
            "failed_requests": self.failed_requests,
            "bench_run_ids": list(self.bench_run_ids),
            "overhead_s": self.overhead_s,
            "bench_s": {str(c): v for c, v in self.bench_s.items()},
            "server_throughput": {str(c): v for c, v in self.server_throughput.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArmVisit:
        return cls(
            arm=str(data["arm"]),
            round=int(data["round"]),
            verification_id=data.get("verification_id"),
            live_value=data.get("live_value"),
            throughput={int(c): float(v) for c, v in data.get("throughput", {}).items()},
            failed_requests=int(data.get("failed_requests", 0)),
            bench_run_ids=[int(i) for i in data.get("bench_run_ids", [])],
            position=int(data.get("position", 0)),
            order=str(data.get("order", "")),
            overhead_s=float(data.get("overhead_s", 0.0)),
            bench_s={int(c): float(v) for c, v in data.get("bench_s", {}).items()},
            server_throughput={
                int(c): float(v) for c, v in (data.get("server_throughput") or {}).items()
            },
        )


@dataclass
class AbResult:
    """Every visit, the comparisons and the anomalies, the design's cost, where it was recorded.

    ``decided`` maps a concurrency to (rounds, decision) of the confidence sequence; ``cost`` is
    what the visits took, ``fixed_cost`` the fixed design of ``config.rounds`` rounds priced from
    them; ``session_id`` is the journal's id (``ab --resume``)."""

    config: AbConfig
    original: str | None
    visits: list[ArmVisit] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    anomalies: list[Anomaly] = field(default_factory=list)
    restored: bool = False
    ab_id: int | None = None
    session_id: int | None = None
    resumed: bool = False
    stopped: str = STOP_FIXED
    decided: dict[int, tuple[int | None, str]] = field(default_factory=dict)
    cost: DesignCost | None = None
    fixed_cost: DesignCost | None = None
    drops: list[Anomaly] = field(default_factory=list)

    def throughput(self, arm: str) -> dict[int, list[float]]:
        """Each concurrency's throughput of ``arm``, one value per visit in the order they ran."""
        out: dict[int, list[float]] = {}
        for visit in self.visits:
            if visit.arm == arm:
                for conc, thr in visit.throughput.items():
                    out.setdefault(conc, []).append(thr)
        return out

    def server_throughput(self, arm: str) -> dict[int, list[float]]:
        """Each concurrency's server-counted tok/s of ``arm``, one value per visit that had one."""
        out: dict[int, list[float]] = {}
        for visit in self.visits:
            if visit.arm == arm:
                for conc, thr in visit.server_throughput.items():
                    out.setdefault(conc, []).append(thr)
        return out

    @property
    def server_disagreements(self) -> list[ServerDisagreement]:
        """Where the client's ratio and the servers' disagree
        (:mod:`servelab.core.ab.crosscheck`)."""
        cfg = self.config
        servers = server_ratios(
            self.server_throughput(cfg.baseline), self.server_throughput(cfg.candidate)
        )
        return disagreements({c.concurrency: c.ratio for c in self.comparisons}, servers)

    @property
    def rounds_run(self) -> int:
        return len({v.round for v in self.visits})

    def design(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "order": cfg.order,
            "order_seed": cfg.order_seed,
            "until_decided": cfg.until_decided,
            "max_rounds": cfg.rounds,
            "margin": cfg.margin,
            "boundary": cfg.boundary,
            "rounds_run": self.rounds_run,
            "stopped": self.stopped,
            "decided": {str(c): {"rounds": r, "decision": d} for c, (r, d) in self.decided.items()},
            "cost": None if self.cost is None else dataclasses.asdict(self.cost),
            "fixed_cost": None if self.fixed_cost is None else dataclasses.asdict(self.fixed_cost),
            "gpus": cfg.gpus,
            "session_id": self.session_id,
            "resumed": self.resumed,
            "drops": [d.to_dict() for d in self.drops],
        }

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
            visits=tuple(v.to_json() for v in self.visits),
            design=self.design(),
        )

    def to_json(self) -> dict[str, Any]:
        flags = [d.to_json() for d in self.server_disagreements]
        return self.record().to_json() | {"server_disagreements": flags}
