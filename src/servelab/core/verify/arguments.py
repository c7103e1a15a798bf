"""What verify finds about an argument knob, layer by layer, and the rule that names the layer that
disagrees (pure; the codes are :class:`servelab.core.verify.checks.CheckCode`'s ``*argument*``
and ``*unit*`` members, the words are :mod:`servelab.report.verify`'s).

An argument knob (``--max-running-requests``) has four layers, each able to hold a stale copy:

1. **the file**: the place that wins among the service's ``args_env`` variable, the spec's own
   command line and its ``--config`` file (:mod:`servelab.core.knobs.places`), and the values it
   overrides;
2. **the unit**: for a systemd service, whether systemd loaded the unit file as it is on disk
   (``NeedDaemonReload``): a stale unit restarts the old command line;
3. **the process**: its own ``/proc/PID/cmdline`` as the engine parses it, ``--config`` merged
   under it;
4. **the engine**: what it reports it runs with (SGLang's ``/server_info``; vLLM's under
   ``VLLM_SERVER_DEV_MODE=1``), unknown when it does not say.

:func:`argument_verdict` compares them: the process against the file (a restart pending, a value
lost on restart), then the engine against the process (``live.engine_differs``: the command line
says 64, the engine runs 128: a default somewhere shadows it). An engine that does not report the
field is unknown, shown as such, never counted as agreeing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from servelab.core.knob import same_value
from servelab.core.knobs.rules import LiveVerdict, live_verdict
from servelab.core.ledger.codec import OMITTED_IF_NONE
from servelab.core.redacted import masked_serializer

__all__ = [
    "ArgumentDropped",
    "ArgumentInFile",
    "ArgumentLive",
    "ArgumentVerdict",
    "Overridden",
    "UnitState",
    "argument_verdict",
]


@dataclass(frozen=True)
class Overridden:
    """A place that also sets the argument, whose value the winning place hides from the engine."""

    place: str
    value: str | None


@dataclass(frozen=True)
class ArgumentInFile:
    """``config.argument_*``: the argument's value before the start (``file``), the place it comes
    from (``place``: ``args_env``, ``spec``, ``config_file``; None: set nowhere, the engine's
    default) and that place's file (``path``), the spec's pin (``spec``), and the places it
    overrides."""

    _masked = masked_serializer("knob", "file", "spec", "overridden")

    knob: str
    file: str | None
    place: str | None
    path: str | None
    spec: str | None
    overridden: tuple[Overridden, ...] = ()


@dataclass(frozen=True)
class ArgumentDropped:
    """``config.argument_dropped``: the config file (``path``) writes the argument ``false``,
    which the engine drops (vLLM: write ``no-x: true``), so the engine runs with its default."""

    knob: str
    path: str
    key: str


@dataclass(frozen=True)
class UnitState:
    """``config.unit_*``: the service's systemd unit and whether systemd must reload it first
    (None: systemd did not answer)."""

    unit: str
    needs_reload: bool | None


@dataclass(frozen=True)
class ArgumentLive:
    """``live.argument_*`` and ``live.engine_differs``: the argument in the file, in the process
    (``live``, and where the process got it: ``cmdline``, ``config``, ``default``), what the engine
    reports (``engine``, read from ``engine_field``; ``engine_known`` False: it does not say), and
    the file-vs-process verdict."""

    _masked = masked_serializer("knob", "file", "live", "engine")

    pid: int
    pid_source: str
    knob: str
    file: str | None
    live: str | None
    live_source: str
    verdict: LiveVerdict
    engine_known: bool = False
    engine: Annotated[str | None, OMITTED_IF_NONE] = None
    engine_field: Annotated[str | None, OMITTED_IF_NONE] = None


@dataclass(frozen=True)
class ArgumentVerdict:
    """The outcome of the comparison: the file-vs-process verdict, and whether the engine
    disagrees with a process that agrees with its file."""

    verdict: LiveVerdict
    engine_differs: bool

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.engine_differs


def argument_verdict(
    file: str | None, live: str | None, engine: str | None, engine_known: bool
) -> ArgumentVerdict:
    """Compare the layers: the process against the file, then the engine against the process
    (numbers compare as numbers: the engine reports a resolved value). An engine whose value is
    null reports the engine's default, which an unset argument agrees with."""
    verdict = live_verdict(file, live)
    if not verdict.ok or not engine_known or live is None:
        return ArgumentVerdict(verdict, False)
    return ArgumentVerdict(verdict, not same_value(live, engine))
