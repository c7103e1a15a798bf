"""A check as it is shown: a secret-looking knob's values masked (the one redaction policy,
:func:`servelab.core.redaction.mask`; the verdicts were drawn from the real values before), and
its result (``pass``, ``fail``, ``skip``: a skipped layer is not a pass). Pure."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from servelab.core.redaction import mask
from servelab.core.verify.arguments import ArgumentInFile, ArgumentLive
from servelab.core.verify.checks import Check, CheckCode, KnobLive, KnobNotReadBack, LayerSkipped
from servelab.core.verify.record import UntypedCheck

__all__ = [
    "CheckResult",
    "masked_argument_live",
    "masked_in_file",
    "masked_knob_live",
    "result_of",
]


class CheckResult(StrEnum):
    """A check's outcome as shown and printed (``result`` in ``verify --json``)."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


def masked_in_file(data: ArgumentInFile) -> ArgumentInFile:
    """``data`` with a secret-looking knob's values (a secret-shaped value's shape) masked, as the
    text shows it."""
    hidden = tuple(replace(o, value=mask(data.knob, o.value)) for o in data.overridden)
    file, spec = mask(data.knob, data.file), mask(data.knob, data.spec)
    return replace(data, file=file, spec=spec, overridden=hidden)


def masked_argument_live(data: ArgumentLive) -> ArgumentLive:
    """``data`` (its verdict drawn from the real values) with a secret knob's values masked."""
    file, live, engine = (mask(data.knob, v) for v in (data.file, data.live, data.engine))
    return replace(data, file=file, live=live, engine=engine)


def masked_knob_live(data: KnobLive) -> KnobLive:
    """``data`` (its verdict drawn from the real values) with a secret knob's values masked."""
    return replace(data, file=mask(data.knob, data.file), live=mask(data.knob, data.live))


def result_of(check: Check | UntypedCheck) -> CheckResult:
    """``skip`` for a layer not checked (``e2e.skipped``) and a knob not read back
    (``live.not_read_back``): neither a pass nor a failure; else ``pass``/``fail``."""
    if isinstance(check, Check):
        if isinstance(check.data, LayerSkipped | KnobNotReadBack):
            return CheckResult.SKIP
        return CheckResult.PASS if check.ok else CheckResult.FAIL
    if check.code in (CheckCode.E2E_SKIPPED.value, CheckCode.LIVE_NOT_READ_BACK.value):
        return CheckResult.SKIP
    return CheckResult.PASS if check.ok else CheckResult.FAIL
