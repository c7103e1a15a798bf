"""What ``ab`` checks before it measures anything or starts its journal (exit 2, nothing
changed): its two arms, and ``--keep``.

The arms (:func:`check_arms`): each a value the knob takes
(:func:`~servelab.ops.knob.check_setting`), and not one setting written twice: a flag's ``on``
and ``true``, a number's ``256`` and ``0256`` (each as the knob stores it, compared as
:func:`~servelab.core.knobs.knob.same_value` compares layers) would run two arms of one setting.

``--keep`` (:func:`check_keep`), the value an A/B leaves live at its end: ``better``,
``baseline`` and ``candidate`` name an arm; any other text is a value, which must be one the knob
takes (:func:`~servelab.ops.knob.check_setting`: an undeclared knob, a value the knob
cannot take, one over 4 KiB refused, exit 2). A keyword written in another case (``Better``) is
refused as a misspelling rather than written into the env file as a value. The check runs before
the A/B measures anything or starts its journal, so a bad ``--keep`` changes nothing.
"""

from __future__ import annotations

from servelab.core.ab.result import Keep
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knobs.knob import same_value
from servelab.errors import KnobError
from servelab.ops.knob import check_setting

__all__ = ["check_arms", "check_keep"]


def check_arms(spec: DeploymentSpec, service: str, knob: str, values: tuple[str, str]) -> None:
    """Refuse arms the knob cannot take, or two that are one setting (KnobError, exit 2)."""
    stored = [check_setting(spec, service, knob, value) for value in values]
    if same_value(*stored):
        raise KnobError(
            f"{service}:{knob}: {values[0]!r} and {values[1]!r} are one setting "
            f"({stored[0]}): an A/B needs two different values"
        )


def check_keep(spec: DeploymentSpec, service: str, knob: str, keep: str | None) -> None:
    """Refuse a ``keep`` no A/B of ``service``'s ``knob`` could leave live (KnobError, exit 2)."""
    if keep is None or keep in tuple(Keep):
        return
    if keep.strip().lower() in tuple(Keep):
        raise KnobError(
            f"--keep {keep!r}: did you mean {keep.strip().lower()}? (better, baseline and "
            "candidate are written in lower case; any other text is a value of the knob)"
        )
    try:
        check_setting(spec, service, knob, keep)
    except KnobError as exc:
        raise KnobError(f"--keep {keep!r} is not a value {knob} takes: {exc}") from None
