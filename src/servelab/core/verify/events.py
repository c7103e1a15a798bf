"""What a layered verification tells while it runs (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`VerifyProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ProbingE2E",
    "ProbingHealth",
    "ProbingWorkers",
    "ReadingEnvFile",
    "ReadingLiveEnv",
    "VerifyProgress",
    "VerifyingLayers",
]


@dataclass(frozen=True)
class VerifyingLayers:
    """A verification of these layers begins."""

    layers: tuple[str, ...]


@dataclass(frozen=True)
class ReadingEnvFile:
    """The config layer reads a service's env file."""

    service: str


@dataclass(frozen=True)
class ReadingLiveEnv:
    """The live layer reads the environment of a service's process."""

    service: str


@dataclass(frozen=True)
class ProbingHealth:
    """The health layer probes a service's readiness ``path``."""

    service: str
    path: str


@dataclass(frozen=True)
class ProbingE2E:
    """The e2e layer sends its chat completion through the entry point."""

    entry: str


@dataclass(frozen=True)
class ProbingWorkers:
    """xPyD: the e2e layer sends requests through the router until every worker is reached."""

    router: str


VerifyProgress = (
    VerifyingLayers | ReadingEnvFile | ReadingLiveEnv | ProbingHealth | ProbingE2E | ProbingWorkers
)
