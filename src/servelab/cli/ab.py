"""``servelab ab``: knob A/B with live-verified arms in counterbalanced rounds.

``--until-decided`` stops by a confidence sequence, ``--resume ID`` picks an interrupted A/B up,
``--plan`` sizes one from the recorded A/Bs."""

from __future__ import annotations

import dataclasses
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
    run,
    say,
    show_progress,
    spec_option,
)
from servelab.core.ab.compare import INCONCLUSIVE
from servelab.core.ab.design import ORDER_ABBA, ORDERS
from servelab.core.ab.sequential import BOUNDARIES, DEFAULT_BOUNDARY
from servelab.core.options import parse_concurrency, parse_knob_arms, parse_length
from servelab.io.files import write_atomic
from servelab.io.ledger.journal import FINISHED, AbJournal
from servelab.ops.ab.ab import AbConfig, AbResult, resume_ab, run_ab
from servelab.ops.ab.config import DEFAULT_MAX_ROUNDS
from servelab.ops.ab.plan import AbPlan, plan_ab
from servelab.ops.bench.bench import BenchConfig
from servelab.ops.context import Operation
from servelab.report.ab import ab_markdown, ab_png, plan_markdown

__all__ = ["parse_fraction", "register"]


def parse_fraction(text: str) -> float:
    """``1%`` or ``0.01`` → 0.01."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a fraction (1% or 0.01)") from None
    if not 0.0 <= value < 1.0:
        raise click.BadParameter(f"{text!r} is out of range (0% .. 100%)")
    return value


def _fraction(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    return None if value is None else parse_fraction(value)


async def _ab(
    spec_path: Path | None, ledger_path: Path | None, cfg: AbConfig | None, resume: int | None
) -> AbResult:
    where = SpecAndLedger(spec_path, ledger_path)
    if cfg is not None:
        where.spec().spec.service(cfg.service)  # unknown service: a SpecError (exit 2), nothing run
    loaded = where.deployment()
    with where.ledger() as ledger:
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            if cfg is None or resume is not None:
                return await resume_ab(op, resume or 0, ledger=ledger, bench_progress=bench_levels)
            return await run_ab(op, cfg, bench_progress=bench_levels)


def _plan(opts: dict[str, Any], service: str, knob: str) -> AbPlan:
    where = SpecAndLedger(opts["spec_path"], opts["ledger_path"])
    where.spec().spec.service(service)
    with where.ledger() as ledger:
        return plan_ab(
            ledger,
            service=service,
            knob=knob,
            concurrencies=parse_concurrency(opts["concurrency"]),
            effect=opts["effect"],
            power=opts["power"],
            margin=opts["margin"],
            max_rounds=opts["max_rounds"],
            seed=opts["seed"],
            boundary=opts["boundary"],
        )


def _check_resume(opts: dict[str, Any]) -> None:
    """Refuse an unknown or finished journal id before anything runs (exit 2)."""
    where = SpecAndLedger(opts["spec_path"], opts["ledger_path"])
    with where.ledger() as ledger:
        session = AbJournal(ledger).get(opts["resume"])
    if session is None:
        raise click.BadParameter(f"no A/B {opts['resume']} in the journal", param_hint="--resume")
    if session.status == FINISHED:
        raise click.BadParameter(
            f"A/B {opts['resume']} is already finished (ab_runs {session.ab_id})",
            param_hint="--resume",
        )


def _write(out: Path, result: AbResult) -> list[Path]:
    stem = f"ab-{result.ab_id or 'run'}"
    files = {out / f"{stem}.md": ab_markdown(result).encode(), out / f"{stem}.png": ab_png(result)}
    for path, data in files.items():
        write_atomic(path, data)
    return list(files)


def _config(opts: dict[str, Any]) -> AbConfig:
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
    return AbConfig(
        arms.service, arms.name, arms.baseline, arms.candidate, bench, opts["repeat"],
        opts["keep"], order=opts["order"], order_seed=opts["order_seed"],
        until_decided=opts["until_decided"], max_rounds=opts["max_rounds"],
        margin=opts["margin"], gpus=opts["gpus"], boundary=opts["boundary"],
    )  # fmt: skip


def _print(opts: dict[str, Any], result: AbResult) -> None:
    files = _write(opts["out"], result) if opts["out"] else []
    if opts["as_json"]:
        print_json({**result.to_json(), "files": [str(f) for f in files]})
    else:
        console.print(ab_markdown(result), markup=False, highlight=False, soft_wrap=True)
        for path in files:
            say(f"wrote {path}")


@click.command("ab")
@spec_option
@click.option("--knob", "knob", default=None, help="SERVICE:NAME=BASELINE,CANDIDATE")
@click.option("--concurrency", default="64,80,96", show_default=True, help="Comma list.")
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(1), help="Rounds.")
@click.option("--requests", default=256, show_default=True, type=click.IntRange(1), help="Per run.")
@click.option("--input-len", default="128", show_default=True, help="Prompt tokens (N or a:b).")
@click.option("--output-len", default="64", show_default=True, help="Output tokens (N or a:b).")
@click.option("--warmup", default=4, show_default=True, type=click.IntRange(0))
@click.option("--idle-timeout", default=60.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--order",
    type=click.Choice(ORDERS),
    default=ORDER_ABBA,
    show_default=True,
    help="Visit order within rounds: abba, or random (seeded, recorded).",
)
@click.option(
    "--order-seed", default=0, show_default=True, type=int, help="Seed of --order random."
)
@click.option("--until-decided", is_flag=True, help="Stop once every C is decided (anytime-valid).")
@click.option(
    "--max-rounds",
    default=DEFAULT_MAX_ROUNDS,
    show_default=True,
    type=click.IntRange(2),
    help="Most rounds with --until-decided (and for --plan).",
)
@click.option("--margin", default=None, callback=_fraction, help="Equivalence margin, e.g. 1%.")
@click.option(
    "--boundary",
    type=click.Choice(BOUNDARIES),
    default=DEFAULT_BOUNDARY,
    show_default=True,
    help="Stopping rule: pocock (repeated intervals, --max-rounds looks) or lai (any looks).",
)
@click.option(
    "--gpus",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="GPUs the deployment holds (prices GPU-minutes).",
)
@click.option("--resume", type=int, default=None, help="Resume the interrupted A/B journal ID.")
@click.option("--plan", is_flag=True, help="Rounds needed, from recorded A/Bs; runs nothing.")
@click.option(
    "--effect",
    default="5%",
    show_default=True,
    callback=_fraction,
    help="--plan: the change to detect.",
)
@click.option("--power", default=0.8, show_default=True, type=click.FloatRange(0.01, 0.999))
@click.option("--keep", is_flag=True, help="Keep the last arm's value instead of restoring.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write .md and .png.")
@ledger_option
@json_option
def ab_command(**opts: Any) -> None:
    """A/B a knob: set, co-restart, verify live, measure; counterbalanced rounds; verdict per C."""
    if opts["resume"] is None and opts["knob"] is None:
        raise click.UsageError("--knob SERVICE:NAME=BASELINE,CANDIDATE is required (or --resume)")
    if opts["plan"]:
        cfg = _config(opts)
        plan = _plan(opts, cfg.service, cfg.knob)
        if opts["as_json"]:
            print_json(dataclasses.asdict(plan))
        else:
            console.print(plan_markdown(plan), markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_OK)
    if opts["resume"] is not None:
        _check_resume(opts)
    cfg_or_none = None if opts["resume"] is not None else _config(opts)
    result = run(_ab(opts["spec_path"], opts["ledger_path"], cfg_or_none, opts["resume"]))
    _print(opts, result)
    failed = sum(v.failed_requests for v in result.visits)
    if failed:
        err_console.print(f"{failed} request(s) failed during the A/B", style="red")
    if any(c.verdict == INCONCLUSIVE for c in result.comparisons):
        err_console.print("some comparisons are inconclusive: add --repeat", style="yellow")
    sys.exit(EXIT_FAILED if failed else EXIT_OK)


def register(group: click.Group) -> None:
    group.add_command(ab_command)
