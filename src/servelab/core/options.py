"""The texts of command-line options, parsed (pure): concurrency lists, length distributions and
an A/B's knob arms.

Each parser raises :class:`ValueError` naming what it expected; the CLI turns that into a usage
error (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from servelab.core.load.workload import LengthDist

__all__ = ["KNOB_ARMS_FORM", "KnobArms", "parse_concurrency", "parse_knob_arms", "parse_length"]

#: The form ``ab --knob`` takes.
KNOB_ARMS_FORM = "SERVICE:NAME=BASELINE,CANDIDATE"


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"64,80,96"`` → ``(64, 80, 96)``; raises ValueError on anything else."""
    values = tuple(int(part) for part in text.split(",") if part.strip())
    if not values or min(values) < 1:
        raise ValueError(f"concurrency must be positive integers, got {text!r}")
    return values


def parse_length(text: str) -> LengthDist:
    """``"128"`` (fixed), ``"uniform:128:32"`` (128 ± 32), ``"normal:128:16"`` (mean:std)."""
    parts = text.split(":")
    if len(parts) == 1:
        return LengthDist("fixed", int(parts[0]))
    if len(parts) == 3:
        return LengthDist(parts[0], float(parts[1]), float(parts[2]))
    raise ValueError(f"length must be N, uniform:N:SPREAD or normal:MEAN:STD, got {text!r}")


@dataclass(frozen=True)
class KnobArms:
    """An A/B's knob and its two values: ``decode:NAME=256,512``."""

    service: str
    name: str
    baseline: str
    candidate: str


def parse_knob_arms(text: str) -> KnobArms:
    """``decode:NAME=256,512`` → ``KnobArms("decode", "NAME", "256", "512")``.

    Raises ValueError ("expected SERVICE:NAME=BASELINE,CANDIDATE") on any other form.
    """
    expected = ValueError(f"expected {KNOB_ARMS_FORM}")
    try:
        target, values = text.split("=", 1)
        service, name = target.split(":", 1)
        baseline, candidate = (v.strip() for v in values.split(","))
    except ValueError:
        raise expected from None
    if not (service and name and baseline and candidate):
        raise expected
    return KnobArms(service, name, baseline, candidate)
