"""Text renderings of verifications: one table per layer and a summary (no I/O, returns str)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from servelab.ops.verify import LAYERS, Check, VerifyReport
from servelab.report.text import plain_text

__all__ = ["render_verify"]

_TITLES = {
    "config": "config: env file vs spec and backup",
    "live": "live: /proc/PID/environ vs env file",
    "health": "health: readiness endpoints",
    "e2e": "e2e: streaming chat completion through the entry point",
}


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
    return plain_text(*tables) + _summary(report) + "\n"
