"""A router's launch settings against its spec's, in words (issue 38, the nineteenth pass's M4):
``verify``'s ``live.router_*`` checks and ``up``'s warning on a router found already up share
them (:mod:`servelab.core.deploy.relaunch` finds the settings).

Each setting as ``NAME: spec VALUE, live VALUE``; a setting one side does not give is ``not
given``, a flag given without a value ``given``. Values are shown masked (what
:func:`~servelab.core.redaction.redact` finds), escaped as knob values are, and cut at
:data:`SHOWN_CHARS` characters; at most :data:`SHOWN_SETTINGS` settings are named, then how many
more.
"""

from __future__ import annotations

from collections.abc import Sequence

from servelab.core.deploy.relaunch import SettingChange
from servelab.core.redaction import redact
from servelab.report.text import show_value

__all__ = ["SHOWN_CHARS", "SHOWN_SETTINGS", "changed_settings"]

#: The most characters of one value shown (a router's worker list, an ``extra_args`` word).
SHOWN_CHARS = 120
#: The most settings named in one line.
SHOWN_SETTINGS = 8


def _cut(text: str) -> str:
    shown = show_value(redact(text))
    return shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 1] + "…"


def _value(value: str | None) -> str:
    if value is None:
        return "not given"
    return "given" if value == "" else _cut(value)


def changed_settings(changes: Sequence[SettingChange]) -> str:
    """``policy: spec cache_aware, live round_robin; health_check_interval_s: spec 9, live 1``."""
    named = [
        f"{_cut(change.setting)}: spec {_value(change.spec)}, live {_value(change.live)}"
        for change in changes[:SHOWN_SETTINGS]
    ]
    more = len(changes) - SHOWN_SETTINGS
    return "; ".join(named) + (f"; and {more} more setting(s)" if more > 0 else "")
