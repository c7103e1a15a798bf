"""Text renderings of verifications and knob operations (tables; no I/O, returns str)."""

from __future__ import annotations

import io

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from servelab.core.knobs import (
    LIVE_DIFFERS,
    LIVE_LOST_ON_RESTART,
    LIVE_MATCH,
    LIVE_RESTART_NEEDED,
    LIVE_UNSET,
)
from servelab.ops.knob import KnobChange, KnobDiff
from servelab.ops.verify import LAYERS, Check, VerifyReport

__all__ = [
    "VERDICT_WORDS",
    "render_knob_change",
    "render_knob_diff",
    "render_knob_value",
    "render_verify",
]

#: How a file-vs-live verdict reads.
VERDICT_WORDS = {
    LIVE_MATCH: "live = file",
    LIVE_UNSET: "not set in file or live (engine default)",
    LIVE_RESTART_NEEDED: "in file but not live: restart needed",
    LIVE_LOST_ON_RESTART: "live but not in file: lost on next restart",
    LIVE_DIFFERS: "differs: restart needed",
}

_TITLES = {
    "config": "config: env file vs spec and backup",
    "live": "live: /proc/PID/environ vs env file",
    "health": "health: readiness endpoints",
    "e2e": "e2e: streaming chat completion through the entry point",
}


def _text(*renderables: RenderableType, width: int = 120) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, highlight=False)
    for renderable in renderables:
        console.print(renderable)
    return buffer.getvalue()


def _show(value: str | None) -> str:
    return "(unset)" if value is None else value


def _layer_table(layer: str, checks: list[Check]) -> Table:
    table = Table(title=_TITLES.get(layer, layer), title_justify="left", expand=False)
    table.add_column("service", no_wrap=True)
    table.add_column("knob" if layer in ("config", "live") else "what", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail / reason", overflow="fold")
    for check in checks:
        what = check.data.get("knob") or check.data.get("path") or check.data.get("model") or ""
        table.add_row(
            Text(check.service),
            Text(str(what)),
            Text("PASS" if check.ok else "FAIL"),
            Text(check.detail),
        )
    return table


def _summary(report: VerifyReport) -> str:
    failed = report.failures
    head = "PASS" if report.ok else "FAIL"
    line = f"verify {head}: {len(report.checks) - len(failed)}/{len(report.checks)} checks passed"
    line += f" in {report.elapsed_s:.2f} s"
    if report.verification_id is not None:
        line += f"; recorded as verification #{report.verification_id}"
    for check in failed:
        line += f"\n  FAIL {check.layer} {check.service}: {check.detail}"
    return line


def render_verify(report: VerifyReport) -> str:
    """One table per layer (in layer order), then a summary naming every failure."""
    tables = [_layer_table(layer, report.layer(layer)) for layer in LAYERS if report.layer(layer)]
    return _text(*tables) + _summary(report) + "\n"


def render_knob_value(service: str, name: str, value: str | None, env_file: str) -> str:
    """``decode SGLANG_..=512  (in /path/decode.env)``."""
    shown = f"{name}={value}" if value is not None else f"{name} is not set"
    return f"{service} {shown}  (in {env_file})\n"


def render_knob_change(change: KnobChange) -> str:
    """What ``knob set`` did, the backup, the record, and whether a restart is needed."""
    where = f"{change.service} {change.name}"
    if not change.changed:
        return f"{where} is already {_show(change.new)} in {change.env_file}; nothing written\n"
    lines = [f"{where}: {_show(change.old)} -> {_show(change.new)} in {change.env_file}"]
    lines.append(f"  backup: {change.backup_path or '(none: the file did not exist)'}")
    if change.change_id is not None:
        lines.append(f"  recorded as knob change #{change.change_id}")
    if change.spec_value is not None and change.new != change.spec_value:
        lines.append(f"  note: the spec pins {change.spec_value}; `servelab verify` will flag it")
    if change.live_error is not None:
        lines.append(
            f"  could not read the live value ({change.live_error}); restart {change.service} "
            "to be sure the new value is live"
        )
    elif change.restart_needed:
        lines.append(
            f"  restart needed: {change.service} runs with {_show(change.live)}; "
            f"the new value becomes live after `servelab restart {change.service}`"
        )
    elif change.running:
        lines.append(f"  {change.service} already runs with this value; no restart needed")
    else:
        lines.append(f"  {change.service} is not running: the value is used at its next start")
    return "\n".join(lines) + "\n"


def render_knob_diff(diff: KnobDiff) -> str:
    """File, backup and live values side by side, and the file-vs-live verdict."""
    table = Table(title=f"{diff.service} {diff.name}", title_justify="left")
    for column in ("spec", "file", "backup", "live"):
        table.add_column(column, no_wrap=True)
    live = _show(diff.live) if diff.running else "(not running)"
    table.add_row(
        Text(_show(diff.spec_value) if diff.spec_value is not None else "(not pinned)"),
        Text(_show(diff.file)),
        Text(_show(diff.backup) if diff.backup_path else "(no backup)"),
        Text(live),
    )
    notes = [f"file:   {diff.env_file}", f"backup: {diff.backup_path or '(none)'}"]
    notes.append(f"live:   pid {diff.pid} ({diff.pid_source})" if diff.running else "live:   -")
    verdict = diff.verdict
    if verdict is not None:
        notes.append(f"verdict: {VERDICT_WORDS[verdict]}")
    return _text(table) + "\n".join(notes) + "\n"
