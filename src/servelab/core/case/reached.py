"""The load an answers test reached and the load it had to reach (typed records, pure; the rule
that reads them is :mod:`servelab.core.case.load`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "RUNNING_SERIES",
    "LoadCheck",
    "LoadReference",
    "LoadSource",
    "ReachedLoad",
    "ReferenceSource",
]

#: The decode's running-requests gauges, as the real engines name them.
RUNNING_SERIES = ("sglang:num_running_reqs", "vllm:num_requests_running")


class LoadSource(StrEnum):
    """What measured the reached load (stored: values unchanged)."""

    ENGINE = "engine_running_gauge"
    CLIENT = "client_in_flight"


class ReferenceSource(StrEnum):
    """Where the load to reach came from (stored: values unchanged)."""

    CASE = "case_evidence"
    REQUESTED = "requested_concurrency"
    PROBE = "probe_bad_arm"  # a bisection probe's bad arm, in the same probe


@dataclass(frozen=True)
class ReachedLoad:
    """The load a test reached: the peak and median running requests over ``samples`` samples,
    measured by ``source`` (the gauge's series name in ``series``; empty for the client)."""

    source: LoadSource = LoadSource.ENGINE
    peak: float = 0.0
    median: float = 0.0
    samples: int = 0
    series: str = ""


@dataclass(frozen=True)
class LoadReference:
    """The load to reach: ``level`` running requests, from ``source`` (the experiment evidence
    it came from when it is the case's)."""

    level: float = 0.0
    source: ReferenceSource = ReferenceSource.REQUESTED
    evidence_id: int | None = None


@dataclass(frozen=True)
class LoadCheck:
    """What the suspect arm reached against the reference, and whether that is enough."""

    reached: ReachedLoad | None = None
    reference: LoadReference = field(default_factory=LoadReference)
    enough: bool = False
