"""``servelab ab``: knob A/B with live-verified arms in counterbalanced rounds.

``--until-decided`` stops by a confidence sequence, ``--resume ID`` picks an interrupted A/B up,
``--plan`` sizes one from the recorded A/Bs."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markdown import Markdown

from servelab.cli.answeropts import answers_config, answers_option, refuse_unkeepable
from servelab.cli.bench import bench_config, check_lengths, check_trace
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
    LoadOptions,
    OutputOptions,
    TraceOptions,
    WorkloadOptions,
    allow_unread_option,
    load_options,
    metric_option,
    output_options,
    slo_option,
    trace_options,
    wait_option,
    workload_options,
)
from servelab.cli.resumed import refuse_options_with_resume
from servelab.cli.sharedoption import Default, Parsed
from servelab.core.ab.compare import Verdict
from servelab.core.ab.design import ORDER_ABBA, ORDERS, Order
from servelab.core.ab.result import AbMetric, AbResult, Keep
from servelab.core.ab.rounds import MAX_ROUNDS, parse_ab_rounds
from servelab.core.ab.sequential import BOUNDARIES, DEFAULT_BOUNDARY, Boundary
from servelab.core.bounds import parse_effect
from servelab.core.ledger.codec import encode
from servelab.core.load.slo import SLO
from servelab.core.options import (
    KNOB_ARMS_FORM,
    KnobArms,
    parse_fraction,
    parse_knob_arms,
)
from servelab.io.files import write_atomic
from servelab.io.ledger.journal import AbJournal, SessionStatus
from servelab.io.overwrite import unused_stem
from servelab.ops.ab.ab import resume_ab, run_ab, unchecked
from servelab.ops.ab.checks import check_arms, check_keep
from servelab.ops.ab.config import DEFAULT_MAX_ROUNDS, AbConfig
from servelab.ops.ab.plan import AbPlan, plan_ab
from servelab.ops.context import Operation
from servelab.report.ab import ab_markdown, ab_png, not_kept_phrase, plan_markdown
from servelab.report.answers import answers_phrase, answers_refusal, unchecked_phrase
from servelab.report.text import safe_markdown

__all__ = [
    "AB_LOAD",
    "ab_command",
]

#: ``ab``'s own defaults of the shared load options.
AB_LOAD = {
    "concurrencies": Default("64,80,96", "the reference incident's levels"),
    "requests": Default("256", "a steady state at C96 needs a few requests per user"),
    "repeat": Default("3", "a paired interval needs rounds"),
    "warmup": Default("4", "every visit follows a co-restart, so its first requests are cold"),
}


async def _ab(
    where: SpecAndLedger, cfg: AbConfig | None, resume: int | None, allow_unread: bool = False
) -> AbResult:
    if cfg is not None:
        where.spec().spec.service(cfg.service)  # unknown service: a SpecError (exit 2), nothing run
    loaded = where.deployment()
    with where.ledger() as ledger:
        ledger.check_writable()  # before the load: a ledger that fails loses no A/B
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            if cfg is None or resume is not None:
                return await resume_ab(op, resume or 0, ledger=ledger, bench_progress=bench_levels)
            return await run_ab(op, cfg, bench_progress=bench_levels, allow_unread=allow_unread)


def _plan(where: SpecAndLedger, cfg: AbConfig, effect: float, power: float) -> AbPlan:
    where.spec().spec.service(cfg.service)
    with where.ledger() as ledger:
        return plan_ab(
            ledger,
            service=cfg.service,
            knob=cfg.knob,
            concurrencies=cfg.bench.concurrencies,
            effect=effect,
            power=power,
            margin=cfg.margin,
            max_rounds=cfg.max_rounds,
            seed=cfg.bench.seed,
            boundary=cfg.boundary,
        )


def _check_arms(where: SpecAndLedger, arms: KnobArms, keep: str | None) -> str | None:
    """Both arms' values and ``--keep`` checked before anything runs or is planned, as ``tune``
    does (an undeclared knob, a value the knob cannot take, one over 4 KiB, two values of one
    setting, a ``--keep`` that names neither arm: exit 2; :mod:`servelab.ops.ab.checks`); the
    ``--keep`` the A/B stores (a value: the arm's own spelling of it)."""
    spec = where.spec().spec
    values = (arms.baseline, arms.candidate)
    check_arms(spec, arms.service, arms.name, values)
    return check_keep(spec, arms.service, arms.name, keep, values)


def _check_resume(where: SpecAndLedger, resume: int) -> None:
    """Refuse an unknown or finished journal id before anything runs (exit 2)."""
    with where.ledger() as ledger:
        session = AbJournal(ledger).get(resume)
    if session is None:
        raise click.BadParameter(f"no A/B {resume} in the journal", param_hint="--resume")
    if session.status == SessionStatus.FINISHED:
        raise click.BadParameter(
            f"A/B {resume} is already finished (ab_runs {session.ab_id})", param_hint="--resume"
        )


def _write(out: Path, result: AbResult) -> list[Path]:
    stem = unused_stem(out, f"ab-{result.ab_id or 'run'}", (".md", ".png"))
    files = {
        out / f"{stem}.md": safe_markdown(ab_markdown(result)).encode(),
        out / f"{stem}.png": ab_png(result),
    }
    for path, data in files.items():
        write_atomic(path, data, parents=True)
    return list(files)


@dataclass(frozen=True)
class _Design:
    """The A/B's own options: how rounds are ordered, when to stop, what a minute costs, what
    the arms are compared on."""

    order: Order
    order_seed: int
    until_decided: bool
    max_rounds: int
    margin: float | None
    boundary: Boundary
    gpus: int
    keep: str | None
    metric: AbMetric = AbMetric.THROUGHPUT
    answers: str = "gate"


@dataclass(frozen=True)
class _Measure:
    """How each visit measures: the load and workload options, the trace, the SLO."""

    load: LoadOptions
    workload: WorkloadOptions
    trace: TraceOptions
    slo: SLO | None
    #: a rate capacity search's probe span (None: not one)
    probe_s: float | None = None


def _config(arms: KnobArms, measure: _Measure, design: _Design) -> AbConfig:
    # The template of every measurement: at the spec's router, each level run once per visit
    # (``load.repeat`` is the rounds).
    load = measure.load
    bench = bench_config(dataclasses.replace(load, repeat=1), measure.workload, url="",
                         trace=measure.trace, slo=measure.slo)  # fmt: skip
    return AbConfig(
        arms.service, arms.name, arms.baseline, arms.candidate, bench, load.repeat, design.keep,
        order=design.order, order_seed=design.order_seed, until_decided=design.until_decided,
        max_rounds=design.max_rounds, margin=design.margin, gpus=design.gpus,
        boundary=design.boundary, metric=design.metric, answers=answers_config(design.answers),
        probe_s=measure.probe_s,
    )  # fmt: skip


def _print(output: OutputOptions, result: AbResult, ok: bool) -> None:
    """The result (``ok``: the exit code is 0, as ``--json`` says for scripts)."""
    files = _write(output.export, result) if output.export else []
    if output.as_json:
        print_json({"ok": ok, **encode(result), "files": [str(f) for f in files]})
    else:
        text = ab_markdown(result)  # piped: the markdown itself; on a terminal: rendered
        console.print(Markdown(text) if console.is_terminal else text, markup=False,
                      highlight=False, soft_wrap=True)  # fmt: skip
        for path in files:
            say(f"wrote {path}")


@click.command("ab")
@spec_option
@click.option(
    "--knob", "arms", type=Parsed(KNOB_ARMS_FORM, parse_knob_arms), default=None,
    help="The knob and its two values, e.g. decode:SGLANG_SM120_MMA_TARGET_CTAS=256,512.",
)  # fmt: skip
@load_options(**AB_LOAD)
@workload_options()
@trace_options()
@slo_option()
@metric_option()
@probe_s_option
@answers_option()
@click.option(
    "--order",
    type=click.Choice([o.value for o in ORDERS]),  # values: click 8.2 matches an enum's names
    default=ORDER_ABBA.value,
    show_default=True,
    help="Visit order within rounds: abba, or random (seeded, recorded).",
)
@click.option(
    "--order-seed", default=0, show_default=True, type=Whole(), help="Seed of --order random."
)
@click.option("--until-decided", is_flag=True, help="Stop once every C is decided (anytime-valid).")
@click.option(
    "--max-rounds",
    default=str(DEFAULT_MAX_ROUNDS),
    show_default=True,
    type=Parsed("ROUNDS", parse_ab_rounds),
    help=f"Most rounds with --until-decided (and for --plan); at most {MAX_ROUNDS}.",
)
@click.option(
    "--margin", type=Parsed("FRACTION", parse_fraction), default=None,
    help="Equivalence margin, e.g. 1%.",
)  # fmt: skip
@click.option(
    "--boundary",
    type=click.Choice([b.value for b in BOUNDARIES]),
    default=DEFAULT_BOUNDARY.value,
    show_default=True,
    help="Stopping rule: pocock (repeated intervals, --max-rounds looks) or lai (any looks).",
)
@click.option(
    "--gpus",
    default=1,
    show_default=True,
    type=Whole(1),
    help="GPUs the deployment holds (prices GPU-minutes).",
)
@click.option("--resume", type=Whole(), default=None, help="Resume the interrupted A/B journal ID.")
@click.option("--plan", is_flag=True, help="Rounds needed, from recorded A/Bs; runs nothing.")
@click.option(
    "--effect",
    type=Parsed("FRACTION", parse_effect),
    default="5%",
    show_default=True,
    help="--plan: the change to detect.",
)
@click.option("--power", default=0.8, show_default=True, type=Finite(0.01, 0.999))
@click.option(
    "--keep",
    metavar="better|baseline|candidate|VALUE",
    default=None,
    help="At the end, leave this value live instead of restoring the original: the better arm "
    "(the original is restored when no arm is better), or one arm, by its word or its value "
    "(compared as the knob takes it: 064 names the arm 64, which is what is kept). An "
    "interrupted A/B always restores.",
)
@allow_unread_option
@output_options()
@ledger_option
@wait_option
def ab_command(
    spec_path: Path | None,
    arms: KnobArms | None,
    load: LoadOptions,
    workload: WorkloadOptions,
    trace: TraceOptions,
    slo: SLO | None,
    metric: str,
    probe_s: float,
    answers: str,
    order: str,
    order_seed: int,
    until_decided: bool,
    max_rounds: int,
    margin: float | None,
    boundary: str,
    gpus: int,
    resume: int | None,
    plan: bool,
    effect: float,
    power: float,
    keep: str | None,
    allow_unread: bool,
    output: OutputOptions,
    ledger_path: Path | None,
    wait: bool,
) -> None:
    """A/B a knob: set, co-restart, verify live, measure; counterbalanced rounds; verdict per C."""
    if resume is None and arms is None:
        raise click.UsageError(f"--knob {KNOB_ARMS_FORM} is required (or --resume)")
    if resume is not None and arms is not None and not plan:
        raise click.UsageError(
            "--resume continues the journalled A/B with its own knob and values: give --knob "
            "for a new A/B, or --resume alone"
        )
    if AbMetric(metric) != AbMetric.THROUGHPUT and slo is None:
        raise click.UsageError(f"--metric {metric} needs --slo")
    if AbMetric(metric) == AbMetric.CAPACITY and trace.plan is not None:
        raise click.UsageError("--metric capacity searches generated load: not with --trace")
    rate_search = AbMetric(metric) == AbMetric.CAPACITY and load.rate is not None
    check_probe_s(rate_search, METRIC_RATE_SEARCH, probe_s, load.deadline_s)
    check_lengths(workload, check_trace(trace.plan, load), None,  # no server asked: the cap
                  max(load.requests, load.warmup))  # fmt: skip
    where = SpecAndLedger(spec_path, ledger_path)
    typed = keep
    if arms is not None:
        keep = _check_arms(where, arms, keep)
    design = _Design(Order(order), order_seed, until_decided, max_rounds, margin,
                     Boundary(boundary), gpus, keep, AbMetric(metric), answers)  # fmt: skip
    measure = _Measure(load, workload, trace, slo, probe_s if rate_search else None)
    if plan:
        if arms is None:
            raise click.UsageError(f"--plan needs --knob {KNOB_ARMS_FORM}")
        sized = _plan(where, _config(arms, measure, design), effect, power)
        if output.as_json:
            print_json({"ok": True, **encode(sized)})
        else:
            console.print(plan_markdown(sized), markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_OK)
    if resume is not None:
        refuse_options_with_resume("A/B")
        _check_resume(where, resume)
    cfg = None if resume is not None or arms is None else _config(arms, measure, design)
    if cfg is not None and keep in (Keep.BETTER, Keep.CANDIDATE, cfg.candidate):
        refuse_unkeepable(cfg.answers, unchecked(cfg), f"--keep {typed}")
    with where.exclusive(wait=wait), naming_down(where.spec):  # a stop no put-back said: named
        result = run(noting(_ab(where, cfg, resume, allow_unread)))
    failed = sum(v.failed_requests for v in result.visits)
    gated = result.answers is not None and result.answers.gates
    # an arm --keep named and not left live (the gate held it back, or its pair layer failed):
    # refused as a gated one is (exit 1)
    held = result.not_kept is not None
    _print(output, result, not (failed or gated or held))
    if failed:
        err_console.print(f"{failed} request(s) failed during the A/B", style="red")
    if any(c.verdict == Verdict.INCONCLUSIVE for c in result.comparisons):
        err_console.print("some comparisons are inconclusive: add --repeat", style="yellow")
    if result.answers_unchecked is not None:
        err_console.print(unchecked_phrase(result.answers_unchecked), style="yellow")
    if result.answers is not None and result.answers.unshown:
        err_console.print(answers_phrase(result.answers), style="yellow", markup=False,
                          highlight=False)  # fmt: skip
    if gated:
        err_console.print(answers_refusal(result), style="red", markup=False, highlight=False)
    if result.not_kept is not None:
        err_console.print(not_kept_phrase(result), style="red" if held else "yellow",
                          markup=False, highlight=False)  # fmt: skip
    sys.exit(EXIT_FAILED if failed or gated or held else EXIT_OK)
