"""``servelab ab``: knob A/B with live-verified, interleaved arms."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from servelab.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    SpecAndLedger,
    bench_levels,
    console,
    err_console,
    json_option,
    ledger_option,
    print_json,
    progress,
    run,
    say,
    spec_option,
)
from servelab.core.compare import INCONCLUSIVE
from servelab.core.options import parse_concurrency, parse_knob_arms, parse_length
from servelab.io.files import write_atomic
from servelab.ops.ab import AbConfig, AbResult, run_ab
from servelab.ops.bench import BenchConfig
from servelab.ops.context import Operation
from servelab.report.ab import ab_markdown, ab_png

__all__ = ["register"]


async def _ab(spec_path: Path | None, ledger_path: Path | None, cfg: AbConfig) -> AbResult:
    where = SpecAndLedger(spec_path, ledger_path)
    where.spec().spec.service(cfg.service)  # unknown service: a SpecError (exit 2), nothing run
    loaded = where.deployment()
    with where.ledger() as ledger:
        async with Operation(loaded, ledger=ledger, progress=progress) as op:
            return await run_ab(op, cfg, bench_progress=bench_levels)


def _write(out: Path, result: AbResult) -> list[Path]:
    stem = f"ab-{result.ab_id or 'run'}"
    files = {out / f"{stem}.md": ab_markdown(result).encode(), out / f"{stem}.png": ab_png(result)}
    for path, data in files.items():
        write_atomic(path, data)
    return list(files)


@click.command("ab")
@spec_option
@click.option("--knob", "knob", required=True, help="SERVICE:NAME=BASELINE,CANDIDATE")
@click.option("--concurrency", default="64,80,96", show_default=True, help="Comma list.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(1), help="Visits/arm.")
@click.option("--requests", default=256, show_default=True, type=click.IntRange(1), help="Per run.")
@click.option("--input-len", default="128", show_default=True, help="Prompt tokens (N or a:b).")
@click.option("--output-len", default="64", show_default=True, help="Output tokens (N or a:b).")
@click.option("--warmup", default=4, show_default=True, type=click.IntRange(0))
@click.option("--idle-timeout", default=60.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--keep", is_flag=True, help="Keep the last arm's value instead of restoring.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write .md and .png.")
@ledger_option
@json_option
def ab_command(**opts: Any) -> None:
    """A/B a knob: set, co-restart, verify live, measure; interleaved arms; verdict per C."""
    try:
        arms = parse_knob_arms(opts["knob"])
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    bench = BenchConfig(
        url="",  # each measurement goes to the router of the spec
        concurrencies=parse_concurrency(opts["concurrency"]),
        requests=opts["requests"],
        input_len=parse_length(opts["input_len"]),
        output_len=parse_length(opts["output_len"]),
        warmup=opts["warmup"],
        idle_timeout_s=opts["idle_timeout"],
        seed=opts["seed"],
    )
    cfg = AbConfig(arms.service, arms.name, arms.baseline, arms.candidate, bench, opts["repeat"],
                   opts["keep"])  # fmt: skip
    result = run(_ab(opts["spec_path"], opts["ledger_path"], cfg))
    files = _write(opts["out"], result) if opts["out"] else []
    if opts["as_json"]:
        print_json({**result.to_json(), "files": [str(f) for f in files]})
    else:
        console.print(ab_markdown(result), markup=False, highlight=False, soft_wrap=True)
        for path in files:
            say(f"wrote {path}")
    failed = sum(v.failed_requests for v in result.visits)
    if failed:
        err_console.print(f"{failed} request(s) failed during the A/B", style="red")
    if any(c.verdict == INCONCLUSIVE for c in result.comparisons):
        err_console.print("some comparisons are inconclusive: add --repeat", style="yellow")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


def register(group: click.Group) -> None:
    group.add_command(ab_command)
