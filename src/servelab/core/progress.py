"""What an operation tells while it runs: the union of every feature's progress events (pure).

Each feature keeps its own events beside its other types (``core/<feature>/events.py``: one frozen
dataclass per kind of moment, data only); this module only composes their unions, so it sits
above every feature it names and nothing in core imports it. Ops tell an event through the
operation's progress callback (:data:`servelab.ops.context.Progress`);
:func:`servelab.report.progress.describe_progress` words each one (matching on its type) and the
CLI prints that line on stderr.

A bench run's progress is a stream of its own (:class:`servelab.ops.bench.bench.BenchProgress`,
many counter updates a second that drive a bar, through the bench's own callback);
:func:`servelab.report.progress.describe_level` words the line a measured level gets.
"""

from __future__ import annotations

from servelab.core.ab.events import AbProgress
from servelab.core.ab.tuneevents import TuneProgress
from servelab.core.answers.events import AnswersProgress
from servelab.core.case.bisectevents import BisectProgress
from servelab.core.case.events import CaseProgress
from servelab.core.deploy.events import DeployProgress
from servelab.core.knobs.events import KnobProgress
from servelab.core.soak.events import SoakProgress
from servelab.core.verify.events import VerifyProgress

__all__ = ["ProgressEvent"]

ProgressEvent = (
    DeployProgress
    | VerifyProgress
    | KnobProgress
    | AbProgress
    | TuneProgress
    | CaseProgress
    | BisectProgress
    | SoakProgress
    | AnswersProgress
)
