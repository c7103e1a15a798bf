"""What setting a knob and proving it live tell while they run (an arm of ab, tune, case) (pure).

One frozen dataclass per kind of moment, data only, nothing worded.
Ops tell these through the operation's progress callback (``Operation.say``); :data:`KnobProgress`
is their union, one part of :data:`servelab.core.progress.ProgressEvent`;
:func:`servelab.report.progress.describe_progress` words each one, matching on its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.redacted import masked_serializer

__all__ = [
    "KnobProgress",
    "KnobSetting",
    "KnobVerifiedLive",
]


@dataclass(frozen=True)
class KnobSetting:
    """A knob is being set in its env file (``value`` None: removed)."""

    _masked = masked_serializer("knob", "value")

    service: str
    knob: str
    value: str | None


@dataclass(frozen=True)
class KnobVerifiedLive:
    """An arm's knob value is proven live (config, live and e2e passed; read back from the
    process), by verification ``verification_id``; ``long_failed``: its short prompts went
    through but verify's long prompt failed (the arm's finding, said, not a reason to stop);
    ``pair_failed``: the pair layer's failed checks (``pair SERVICE: CODE``), the arm's finding
    too: it is live but not verified, measured but never kept."""

    _masked = masked_serializer("knob", "value")

    service: str
    knob: str
    value: str | None
    verification_id: int | None
    long_failed: bool = False
    pair_failed: tuple[str, ...] = ()


KnobProgress = KnobSetting | KnobVerifiedLive
