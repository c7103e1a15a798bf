"""Text renderings of knob operations: ``knob get``, ``knob set`` and ``knob diff``, and how a
file-vs-live verdict reads (returns str, no I/O)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import assert_never

from rich.table import Table
from rich.text import Text

from servelab.core.knob import same_value
from servelab.core.knobs.contract import KnobChange, KnobDiff, KnobValue
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob
from servelab.core.redaction import mask
from servelab.report.text import plain_text, show_value

__all__ = [
    "PLACE_WORDS",
    "describe_unread",
    "describe_verdict",
    "render_knob_change",
    "render_knob_diff",
    "render_knob_value",
]


def describe_verdict(verdict: LiveVerdict) -> str:
    """How a file-vs-live verdict reads."""
    match verdict:
        case LiveVerdict.MATCH:
            return "live = file"
        case LiveVerdict.UNSET:
            return "not set in file or live (engine default)"
        case LiveVerdict.RESTART_NEEDED:
            return "in file but not live: restart needed"
        case LiveVerdict.LOST_ON_RESTART:
            return "live but not in file: lost on next restart"
        case LiveVerdict.DIFFERS:
            return "differs: restart needed"
        case _:
            assert_never(verdict)


#: How the place of a knob's file value reads.
PLACE_WORDS = {
    "env_file": "in",
    "args_env": "in the args_env variable of",
    "config_file": "in the config file",
    "spec": "on the command line the spec gives,",
}


def _where(place: str | None, path: str) -> str:
    if place is None:
        return "set nowhere: the engine's default"
    return f"{PLACE_WORDS.get(place, place)} {path}"


#: A place whose value another one overrides, named in a sentence.
_OVERRIDDEN = {
    "args_env": "the args_env variable",
    "config_file": "the config file",
    "spec": "the spec's command line",
}


def _shadowed(name: str, shadowed: tuple[tuple[str, str | None], ...]) -> list[str]:
    """A line per place whose value the winning place overrides (the engine never sees it)."""
    return [
        f"  overridden: {_OVERRIDDEN.get(place, place)} says {show_value(mask(name, value))}"
        for place, value in shadowed
    ]


def _abbreviated(name: str, abbreviated: tuple[tuple[str, str], ...] | None) -> list[str]:
    """A line per word that may be the knob's flag abbreviated: the value read is uncertain."""
    return [
        f"  uncertain: {_OVERRIDDEN.get(place, place)} gives {word}, which the engine takes "
        f"for {name} if it is a unique prefix of no other flag (argparse's abbreviations); "
        "this engine's flag list is not known here: write the full flag"
        for place, word in abbreviated or ()
    ]


def render_knob_value(got: KnobValue) -> str:
    """``decode SGLANG_..=512  (in /path/decode.env)``, and any value it shadows."""
    value = mask(got.name, got.value)
    shown = f"{got.name}={show_value(value)}" if value is not None else f"{got.name} is not set"
    where = _where(got.place, got.path)
    lines = [f"{got.service} {shown}  ({where})", *_shadowed(got.name, got.shadowed)]
    lines += _abbreviated(got.name, got.abbreviated)
    return "\n".join(lines) + "\n"


_ENGINES = {"sglang": "SGLang", "vllm": "vLLM"}


def describe_unread(found: UnreadKnob) -> str:
    """``not read by vLLM 0.26.0 (did you mean VLLM_X?)``, or why it is unknown."""
    engine = _ENGINES.get(found.engine, found.engine)
    if found.verdict is ReadVerdict.UNKNOWN:
        release = found.version or "(no version reported)"
        return (
            f"unknown whether {engine} {release} reads it: no list of its variables is kept "
            "(declare it under reads_env if the build reads it)"
        )
    if found.verdict is not ReadVerdict.NOT_READ:
        return f"read by {engine} {found.version}"
    hint = f" (did you mean {found.suggestion}?)" if found.suggestion else ""
    return (
        f"not read by {engine} {found.version}{hint}: the engine ignores it, so it changes "
        "nothing (reads_env declares a variable a custom build reads)"
    )


def render_knob_change(change: KnobChange, spec_args: Sequence[str] = ()) -> str:
    """What ``knob set`` did, the backup, the record, and whether a restart is needed (the
    restart's command line naming the spec with ``spec_args``)."""
    restart = shlex.join(["servelab", "restart", change.service, *spec_args])
    where = f"{change.service} {change.name}"
    old, new = (show_value(mask(change.name, v)) for v in (change.old, change.new))
    if not change.changed:
        return f"{where} is already {new} in {change.env_file}; nothing written\n"
    into = _where(change.place, change.env_file)
    lines = [f"{where}: {old} -> {new} {into}"]
    lines.append(f"  backup: {change.backup_path or '(none: the file did not exist)'}")
    if change.change_id is not None:
        lines.append(f"  recorded as knob change #{change.change_id}")
    if change.spec_value is not None and change.new != change.spec_value:
        pin = mask(change.name, change.spec_value)
        lines.append(f"  note: the spec pins {pin}; `servelab verify` will flag it")
    if change.live_error is not None:
        lines.append(
            f"  could not read the live value ({change.live_error}); restart {change.service} "
            "to be sure the new value is live"
        )
    elif change.running and not change.live_read:
        lines.append(
            f"  restart needed: {change.service}'s {change.name} not read back (its environment "
            f"reads blank: it writes over it, as sglang-router does); the new value becomes live "
            f"after `{restart}`"
        )
    elif change.running and not same_value(change.live, change.new):
        lines.append(
            f"  restart needed: {change.service} runs with "
            f"{show_value(mask(change.name, change.live))}; "
            f"the new value becomes live after `{restart}`"
        )
    elif change.shared:
        lines.append(f"  restart needed: the new value becomes live after `{restart}`")
    elif change.running and change.launched:
        lines.append(f"  {change.service} already runs with this value (the env file servelab "
                     "kept when it launched it holds it); no restart needed")  # fmt: skip
    elif change.running:
        lines.append(f"  {change.service} already runs with this value; no restart needed")
    else:
        lines.append(f"  {change.service} is not running: the value is used at its next start")
    for other, live in change.shared:
        runs = (
            f"its {change.name} not read back"  # a router hides it: never said "unset"
            if other in change.shared_unread
            else f"runs with {show_value(mask(change.name, live))}"
        )
        lines.append(f"  {other} reads the same file and {runs}: `{restart}` restarts it too")
    if change.unread is not None:
        lines.append(f"  warning: {change.name}: {describe_unread(change.unread)}")
    return "\n".join(lines) + "\n"


def _live_cell(running: bool) -> str:
    return "(not read back)" if running else "(not running)"


def render_knob_diff(diff: KnobDiff) -> str:
    """File, backup and live values side by side, and the file-vs-live verdict."""
    table = Table(title=f"{diff.service} {diff.name}", title_justify="left")
    for column in ("spec", "file", "backup", "live"):
        table.add_column(column, no_wrap=True)
    spec, file, backup, live = (
        show_value(mask(diff.name, v)) for v in (diff.spec_value, diff.file, diff.backup, diff.live)
    )
    table.add_row(
        Text(spec if diff.spec_value is not None else "(not pinned)"),
        Text(file),
        Text(backup if diff.backup_path else "(no backup)"),
        Text(live if diff.running and diff.live_read else _live_cell(diff.running)),
    )
    where = _where(diff.place, diff.env_file)
    notes = [f"file:   {where}", *_shadowed(diff.name, diff.shadowed)]
    notes += _abbreviated(diff.name, diff.abbreviated)
    notes.append(f"backup: {diff.backup_path or '(none)'}")
    notes.append(f"live:   pid {diff.pid} ({diff.pid_source})" if diff.running else "live:   -")
    if diff.launched:
        notes[-1] += ("; a router, it wrote over its environment: live is the env file servelab "
                      "copied when it launched it")  # fmt: skip
    verdict = diff.verdict
    if verdict is not None:
        notes.append(f"verdict: {describe_verdict(verdict)}")
    elif diff.running:  # its environment reads blank: never "unset"
        notes.append(
            "verdict: live not read back (its environment reads blank: it writes over it, as "
            "sglang-router does); restart it to be sure the file's value is live"
        )
    return plain_text(table) + "\n".join(notes) + "\n"
