"""What ``ab`` checks before it measures anything or starts its journal (exit 2, nothing
changed): its two arms, and ``--keep``.

The arms (:func:`check_arms`): each a value the knob takes
(:func:`~servelab.ops.knob.check_setting`), and not one setting written twice: a flag's ``on``
and ``true``, a number's ``256`` and ``0256`` (each as the knob stores it, compared as
:func:`~servelab.core.knob.same_value` compares layers) would run two arms of one setting.

``--keep`` (:func:`check_keep`), the value an A/B leaves live at its end: ``better``,
``baseline`` and ``candidate`` name an arm; any other text must be one of the two arms' values,
compared as the knob takes them (``064`` names the arm ``64``, ``true`` the arm ``on``), and the
arm's own spelling is what is kept, never a third one: a value that names neither arm (it was
never measured), a value the knob cannot take (:func:`~servelab.ops.knob.check_setting`), an
empty value or one with white space around it (the arms never hold any: their text is
stripped) are refused, exit 2. A keyword written in another case (``Better``) is refused as a
misspelling rather than taken as a value. The check runs before the A/B measures anything or
starts its journal, so a bad ``--keep`` changes nothing. A refused value is shown quoted, or as
``***`` when the redaction policy would mask any of it (a masked ``token=...`` would swallow the
rest of the sentence).
"""

from __future__ import annotations

from servelab.core.ab.result import Keep
from servelab.core.deploy.spec import DeploymentSpec
from servelab.core.knob import same_value
from servelab.core.redaction import REDACTED, redact
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


def _shown(value: str) -> str:
    """``value`` as a refusal shows it: quoted (escapes for what a terminal does not show), cut
    to 40 characters, or ``***`` whole when :func:`~servelab.core.redaction.redact` would mask
    any of it."""
    if redact(value) != value:
        return f"{REDACTED} (masked: it looks like a secret)"
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}… ({len(value):,} characters)"


def check_keep(
    spec: DeploymentSpec, service: str, knob: str, keep: str | None, arms: tuple[str, str]
) -> str | None:
    """``keep`` as the A/B stores it: None, a :class:`~servelab.core.ab.result.Keep` word, or the
    arm's own value (``arms``: baseline, candidate) that ``keep`` names; a ``keep`` no A/B of
    ``service``'s ``knob`` with these arms could leave live is a KnobError (exit 2)."""
    if keep is None or keep in tuple(Keep):
        return keep
    if keep.strip().lower() in tuple(Keep):
        raise KnobError(
            f"--keep {_shown(keep)}: did you mean {keep.strip().lower()}? (better, baseline and "
            "candidate are written in lower case; any other text is one arm's value)"
        )
    if not keep.strip() or keep != keep.strip():
        what = "is empty" if not keep.strip() else "has white space around it"
        raise KnobError(
            f"--keep {_shown(keep)} {what}: name one arm's value as typed "
            f"({_shown(arms[0])} or {_shown(arms[1])}), or better, baseline or candidate"
        )
    try:
        stored = check_setting(spec, service, knob, keep)
    except KnobError as exc:
        why = "" if redact(str(exc)) != str(exc) else f": {exc}"
        raise KnobError(f"--keep {_shown(keep)} is not a value {knob} takes{why}") from None
    for arm in arms:
        if same_value(stored, check_setting(spec, service, knob, arm)):
            return arm
    raise KnobError(
        f"--keep {_shown(keep)} names neither arm of the A/B ({_shown(arms[0])} or "
        f"{_shown(arms[1])}): --keep leaves live a value the A/B measured; name one of them, "
        "or better, baseline or candidate"
    )
