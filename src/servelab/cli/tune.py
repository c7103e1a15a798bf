"""``servelab tune``: the best of several settings, by blocks of live-verified arms and elimination.

``--screen`` screens the knobs' main effects first, ``--resume ID`` picks an interrupted tune up,
``--plan`` sizes one from the recorded A/Bs, ``--keep best`` leaves the arm the concurrencies agree
on live."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from servelab.cli.answeropts import answers_config, answers_option, refuse_unkeepable
from servelab.cli.boundary import EXIT_FAILED, EXIT_OK, console, err_console, print_json, run
from servelab.cli.capacity import METRIC_RATE_SEARCH, check_probe_s, probe_s_option
from servelab.cli.common import (
    SpecAndLedger,
    bench_levels,
    ledger_option,
    say,
    show_progress,
    spec_option,
)
from servelab.cli.interrupted import naming_down, noting
from servelab.cli.numbers import Finite, Whole
from servelab.cli.options import (
    CONCURRENCY,
    DEADLINE,
    IDLE_TIMEOUT,
    RAMP,
    RATE,
    REQUESTS,
    WARMUP,
    WORKERS,
    OutputOptions,
    WorkloadOptions,
    allow_unread_option,
    metric_option,
    output_options,
    slo_option,
    wait_option,
    workload_options,
)
from servelab.cli.resumed import refuse_options_with_resume
from servelab.cli.sharedoption import Default, Parsed
from servelab.core.ab.rounds import MAX_ROUNDS, parse_tune_rounds
from servelab.core.ab.sequential import BOUNDARIES, DEFAULT_BOUNDARY, Boundary
from servelab.core.ab.tune import ORDER_WILLIAMS, TUNE_ORDERS
from servelab.core.ab.tunerun import MAX_ARMS, TuneKnob, TuneMetric, TuneRecord, arm_count
from servelab.core.bench.contract import BenchConfig
from servelab.core.bounds import parse_effect
from servelab.core.ledger.codec import decode, encode
from servelab.core.load.slo import SLO
from servelab.core.options import (
    KNOB_VALUES_FORM,
    KnobValues,
    parse_fraction,
    parse_knob_values,
    parse_positive_minutes,
)
from servelab.io.files import write_atomic
from servelab.io.ledger.journal import SessionStatus
from servelab.io.ledger.tunes import TuneStore
from servelab.io.overwrite import unused_stem
from servelab.ops.ab.tune import resume_tune, run_tune
from servelab.ops.ab.tuneanswers import tune_unchecked
from servelab.ops.ab.tuneconfig import DEFAULT_MAX_ROUNDS, TuneConfig, check_tune
from servelab.ops.ab.tuneplan import plan_tune
from servelab.ops.context import Operation
from servelab.report.answers import unchecked_phrase
from servelab.report.progress import over_budget_phrase
from servelab.report.text import safe_markdown
from servelab.report.tune import (
    plan_markdown,
    too_many_arms,
    tune_json,
    tune_markdown,
    tune_png,
    unshown_phrase,
)

__all__ = [
    "tune_command",
]

#: ``tune``'s own defaults of the shared load options.
TUNE_LOAD = {
    "concurrencies": Default("64,96", "the reference incident's levels where the knob mattered"),
    "requests": Default("256", "a steady state at C96 needs a few requests per user"),
    "warmup": Default("4", "every visit follows a co-restart, so its first requests are cold"),
}


async def _tune(
    where: SpecAndLedger, cfg: TuneConfig | None, resume: int | None, allow_unread: bool = False
) -> TuneRecord:
    loaded = where.deployment()
    with where.ledger() as ledger:
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            if cfg is None:
                return await resume_tune(
                    op, resume or 0, ledger=ledger, bench_progress=bench_levels
                )
            return await run_tune(op, cfg, bench_progress=bench_levels, allow_unread=allow_unread)


def _check_resume(where: SpecAndLedger, resume: int) -> None:
    """Refuse an unknown or finished tune id, or one whose values the spec no longer takes
    (:func:`check_tune`, as a new tune's), before anything runs (exit 2)."""
    with where.ledger() as ledger:
        stored = TuneStore(ledger).get(resume)
    if stored is None:
        raise click.BadParameter(f"no tune {resume} in the ledger", param_hint="--resume")
    if stored.status == SessionStatus.FINISHED:
        raise click.BadParameter(f"tune {resume} is already finished", param_hint="--resume")
    check_tune(where.spec().spec, decode(TuneConfig, stored.config))


def _write(out: Path, record: TuneRecord) -> list[Path]:
    stem = unused_stem(out, f"tune-{record.tune_id or 'run'}", (".md", ".png"))
    files = {out / f"{stem}.md": safe_markdown(tune_markdown(record)).encode(),
             out / f"{stem}.png": tune_png(record)}  # fmt: skip
    for path, data in files.items():
        write_atomic(path, data, parents=True)
    return list(files)


def _print(output: OutputOptions, record: TuneRecord, ok: bool) -> None:
    """The record (``ok``: the exit code is 0, as ``--json`` says for scripts)."""
    files = _write(output.export, record) if output.export else []
    if output.as_json:
        print_json(tune_json(record, [str(f) for f in files], ok))
    else:
        console.print(tune_markdown(record), markup=False, highlight=False, soft_wrap=True)
        for path in files:
            say(f"wrote {path}")


@click.command("tune")
@spec_option
@click.option(
    "--knob", "knobs", multiple=True, type=Parsed(KNOB_VALUES_FORM, parse_knob_values),
    help="A knob and the values to try, e.g. decode:SGLANG_SM120_MMA_TARGET_CTAS=256,384,512; "
    "repeat for a grid (every combination is an arm).",
)  # fmt: skip
@CONCURRENCY.option(TUNE_LOAD["concurrencies"])
@REQUESTS.option(TUNE_LOAD["requests"])
@WARMUP.option(TUNE_LOAD["warmup"])
@RAMP.option()
@RATE.option()
@DEADLINE.option()
@IDLE_TIMEOUT.option()
@WORKERS.option()
@workload_options()
@slo_option()
@metric_option()
@probe_s_option
@answers_option()
@click.option(
    "--max-rounds", default=str(DEFAULT_MAX_ROUNDS), show_default=True,
    type=Parsed("ROUNDS", parse_tune_rounds),
    help=f"Most blocks (each visits every arm still in the running once); at most {MAX_ROUNDS}.",
)  # fmt: skip
@click.option(
    "--max-minutes", type=Parsed("MINUTES", parse_positive_minutes), default=None,
    help="Stop before a block that would outrun this many minutes of visits.",
)  # fmt: skip
@click.option(
    "--margin", type=Parsed("FRACTION", parse_fraction), default="5%", show_default=True,
    help="Equivalence margin, e.g. 1%. Default here: a smaller difference is not worth a "
    "co-restart.",
)  # fmt: skip
@click.option(
    "--alpha", default=0.05, show_default=True, type=Finite(0.001, 0.5),
    help="Family-wise error rate of every statement the tune makes.",
)  # fmt: skip
@click.option(
    "--boundary", type=click.Choice([b.value for b in BOUNDARIES]), default=DEFAULT_BOUNDARY.value,
    show_default=True,
    help="Stopping rule: pocock (repeated intervals, --max-rounds looks) or lai (any looks).",
)  # fmt: skip
@click.option(
    "--order", type=click.Choice(TUNE_ORDERS), default=ORDER_WILLIAMS, show_default=True,
    help="Visit order within blocks: williams (balanced for drift and carry-over) or random.",
)  # fmt: skip
@click.option(
    "--order-seed", default=0, show_default=True, type=Whole(),
    help="Seed of the block order (which arm takes which place).",
)  # fmt: skip
@click.option(
    "--gpus", default=1, show_default=True, type=Whole(1),
    help="GPUs the deployment holds (prices GPU-minutes).",
)  # fmt: skip
@click.option(
    "--screen", is_flag=True,
    help="Screen the knobs first (each exactly two values, the current one first): a two-level "
    "factorial's effects, then a tune over the knobs it cannot rule out.",
)  # fmt: skip
@click.option("--resume", type=Whole(), default=None, help="Resume the interrupted tune ID.")
@click.option("--plan", is_flag=True, help="What the rule takes, from recorded A/Bs; runs nothing.")
@click.option(
    "--effect", type=Parsed("FRACTION", parse_effect), default="5%", show_default=True,
    help="--plan: the change to detect.",
)  # fmt: skip
@click.option(
    "--keep", type=click.Choice(["best"]), default=None,
    help="Leave the best arm live (else the original values are put back).",
)  # fmt: skip
@allow_unread_option
@output_options()
@ledger_option
@wait_option
def tune_command(
    spec_path: Path | None,
    knobs: tuple[KnobValues, ...],
    concurrencies: tuple[int, ...],
    requests: int,
    warmup: int,
    ramp_s: float | None,
    rate: float | None,
    deadline_s: float | None,
    idle_timeout_s: float,
    workers: int,
    workload: WorkloadOptions,
    slo: SLO | None,
    metric: str,
    probe_s: float,
    answers: str,
    max_rounds: int,
    max_minutes: float | None,
    margin: float,
    alpha: float,
    boundary: str,
    order: str,
    order_seed: int,
    gpus: int,
    screen: bool,
    resume: int | None,
    plan: bool,
    effect: float,
    keep: str | None,
    allow_unread: bool,
    output: OutputOptions,
    ledger_path: Path | None,
    wait: bool,
) -> None:
    """Find the best setting: arms in blocks, each made live and proven; the worse dropped."""
    if resume is None and not knobs:
        raise click.UsageError(f"--knob {KNOB_VALUES_FORM} is required (or --resume)")
    rate_search = TuneMetric(metric) == TuneMetric.CAPACITY and rate is not None
    check_probe_s(rate_search, METRIC_RATE_SEARCH, probe_s, deadline_s)
    where = SpecAndLedger(spec_path, ledger_path)
    cfg = None
    if knobs:
        counts = [len(k.values) for k in knobs]  # counted before any arm, spec read or write
        if arm_count(counts) > MAX_ARMS:
            raise click.UsageError(too_many_arms(counts, MAX_ARMS))
        # The template of every measurement: at the spec's router, one run per level and visit.
        bench = BenchConfig(
            url="", concurrencies=concurrencies, requests=requests, warmup=warmup, ramp_s=ramp_s,
            rate=rate, deadline_s=deadline_s, idle_timeout_s=idle_timeout_s, workers=workers,
            input_len=workload.input_len, output_len=workload.output_len, seed=workload.seed,
            endpoint=workload.endpoint, slo=slo,
        )  # fmt: skip
        try:
            cfg = TuneConfig(
                tuple(TuneKnob(k.service, k.name, k.values) for k in knobs), bench,
                TuneMetric(metric), alpha, margin, max_rounds, max_minutes, Boundary(boundary),
                order, order_seed, gpus, keep == "best", screen, answers_config(answers),
                probe_s if rate_search else None,
            )  # fmt: skip
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        cfg = check_tune(where.spec().spec, cfg)  # tune and --plan refuse alike, before anything
        if cfg.keep_best:
            refuse_unkeepable(cfg.answers, tune_unchecked(cfg), "--keep best")
    if plan:
        if cfg is None:
            raise click.UsageError(f"--plan needs --knob {KNOB_VALUES_FORM}")
        with where.ledger() as ledger:
            sized = plan_tune(ledger, cfg, effect=effect)
        if output.as_json:
            print_json({"ok": True, **encode(sized)})
            if sized.over_budget is not None:  # said before any tune starts, as the tune says it
                err_console.print(over_budget_phrase(sized.over_budget), style="yellow",
                                  markup=False, highlight=False)  # fmt: skip
        else:
            console.print(plan_markdown(sized), markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_OK)
    if resume is not None:
        refuse_options_with_resume("tune")
        _check_resume(where, resume)
    # one operator at a time: the tune restarts the deployment; a stop no put-back said: named
    with where.exclusive(wait=wait), naming_down(where.spec):
        record = run(
            noting(_tune(where, None if resume is not None else cfg, resume, allow_unread))
        )
    failed = sum(v.failed_requests for v in record.all_visits)
    _print(output, record, not failed)
    if failed:
        err_console.print(f"{failed} request(s) failed during the tune", style="red")
    if record.answers_unchecked is not None:
        err_console.print(unchecked_phrase(record.answers_unchecked), style="yellow")
    if record.best_unshown:
        err_console.print(unshown_phrase(record), style="yellow", markup=False,
                          highlight=False)  # fmt: skip
    sys.exit(EXIT_FAILED if failed else EXIT_OK)
