"""``servelab investigate``: the whole evidence loop in one command.

Reproduce the symptom, localize it, list the suspects (the layer and every knob changed since the
last good point, with what each bought), decide each by experiment (cheapest first), resolve the
case, carry out its restore plan and write the incident report with the pages the ledger
regenerates. Exit 0 when a suspect was convicted, 1 when the symptom did not reproduce (a
slowdown: or no baseline bench is recorded), nothing was convicted, or ``--max-minutes`` or a
declined experiment stopped it (the state is kept: ``--resume``); 2 on bad input.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from servelab.cli.boundary import EXIT_FAILED, json_option, print_json
from servelab.cli.common import (
    SpecAndLedger,
    ledger_option,
    progress,
    run_with_ledger,
    say,
    show_progress,
    spec_option,
)
from servelab.cli.freetext import stored_text
from servelab.cli.interrupted import noting
from servelab.cli.numbers import Finite, Whole
from servelab.cli.options import (
    CASE,
    FORCE_HELP,
    IDLE_TIMEOUT,
    REQUESTS,
    SESSIONS,
    WorkloadOptions,
    wait_option,
    workload_options,
)
from servelab.cli.sharedoption import Default, Parsed
from servelab.core.answers.contract import AnswersConfig
from servelab.core.bench.contract import BenchConfig
from servelab.core.case.model import RestoreItem
from servelab.core.investigate.events import ExperimentRestarts, InvestigateEvent
from servelab.core.investigate.state import Ending, Symptom
from servelab.core.ledger.codec import encode
from servelab.core.options import MAX_RUN_SECONDS, parse_positive_minutes
from servelab.core.soak.fresh import FreshContext
from servelab.core.soak.result import SoakConfig
from servelab.io.ledger.ledger import Ledger
from servelab.io.outdir import check_out_dir, write_out_dir
from servelab.ops.context import Operation
from servelab.ops.investigate.run import InvestigateConfig, InvestigateOutcome, investigate
from servelab.ops.investigate.steps import StepConfig
from servelab.report.docs import build_docs, describe_restore_item
from servelab.report.investigate import (
    describe_action,
    describe_event,
    describe_restarts,
    investigate_json,
    investigate_lines,
    report_markdown,
)
from servelab.report.investigation import root_cause as phrase

__all__ = [
    "investigate_command",
]


def _tell(event: InvestigateEvent) -> None:
    progress(describe_event(event))


def _describe_item(item: RestoreItem | ExperimentRestarts | str) -> str:
    if isinstance(item, RestoreItem):
        return describe_restore_item(item)
    if isinstance(item, ExperimentRestarts):
        return describe_restarts(item)
    return item


def _confirm(
    what: str, items: Sequence[RestoreItem] | Sequence[str] | Sequence[ExperimentRestarts]
) -> bool:
    for item in items:
        progress(f"{what}: {_describe_item(item)}")
    if what == "experiment":
        return click.confirm("run this experiment (its co-restarts)?", default=False, err=True)
    return click.confirm(f"{what} (co-restart in order, verified live)?", default=False, err=True)


def _steps(
    sessions: int, rounds: int, idle_timeout_s: float, duration: float, requests: int,
    workload: WorkloadOptions,
) -> StepConfig:  # fmt: skip
    # the soak's own default workload: short and long fresh context per round (a fault that needs
    # a long prompt, a KV tile pinned too small, is reached)
    soak = SoakConfig(sessions=sessions, rounds=rounds, idle_timeout_s=idle_timeout_s,
                      duration_s=duration, fresh_context=FreshContext())  # fmt: skip
    bench = BenchConfig(url="", concurrencies=(64,), requests=requests, warmup=4,
                        input_len=workload.input_len, output_len=workload.output_len,
                        seed=workload.seed, endpoint=workload.endpoint,
                        answers=AnswersConfig())  # fmt: skip
    return StepConfig(soak, bench=bench)


def _report_dir(ledger: Ledger, out: Path | None) -> Path:
    return out or ledger.path.parent / "report"


def _check_report(ledger: Ledger, out: Path | None, force: bool) -> None:
    """Before any work: the pages as they would be now may be written in the directory (a file
    servelab did not write there is kept without ``--force``; a link never written through)."""
    check_out_dir(_report_dir(ledger, out), build_docs(ledger.snapshot(records=False)), force)


def _write_report(
    ledger: Ledger, outcome: InvestigateOutcome, out: Path | None, spec_args: tuple[str, ...],
    force: bool,
) -> Path:  # fmt: skip
    """The regenerated pages (the perf plan, the case pages) and the incident report."""
    target = _report_dir(ledger, out)
    docs = build_docs(ledger.snapshot(records=False))
    pages = sorted(p for p in docs if p.endswith(".md"))
    name = f"investigation-case-{outcome.state.case_id}.md"
    docs[name] = report_markdown(outcome.state, pages, spec_args).encode()
    write_out_dir(target, docs, force)
    return target / name


@click.command("investigate")
@click.option(
    "--symptom",
    type=click.Choice([s.value for s in Symptom]),
    default="hang",
    show_default=True,
    help="What was seen: sessions hang, slower, answers changed.",
)
@CASE.option(Default(None, "without it a new case is opened"))
@click.option("--since", default=None, metavar="verify:ID",
              help="The last good point (default: the newest passing verification before the "
              "case was opened).")  # fmt: skip
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--max-minutes", type=Parsed("MINUTES", parse_positive_minutes), default=None,
    help="Stop before a block that would outrun this many minutes of visits.",
)  # fmt: skip
@click.option("--resume", is_flag=True, help="Go on with the case's stored investigation.")
@click.option(
    "--title",
    default="investigation",
    show_default=True,
    help="A new case's title.",
    callback=stored_text,
)
@SESSIONS.option(Default("4", "the reproducing soak and its replays"))
@click.option("--rounds", default=6, show_default=True, type=Whole(1, 10_000))
@IDLE_TIMEOUT.option(Default("5", "the stall threshold of the reproducing soak"))
@click.option("--duration", default=120.0, show_default=True, type=Finite(1, MAX_RUN_SECONDS),
              help="Total deadline of the soak, seconds (localization included). Default here: the "
              "reproducing soak is one step of several.")  # fmt: skip
@REQUESTS.option(Default("400", "an answers run carries 5% probes"))
@workload_options()
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Directory for the docs (default: report/ next to the ledger).")  # fmt: skip
@click.option("--force", is_flag=True,
              help=FORCE_HELP)  # fmt: skip
@spec_option
@ledger_option
@json_option
@wait_option
def investigate_command(
    symptom: str, case_id: int | None, since: str | None, yes: bool, max_minutes: float | None,
    resume: bool, title: str, sessions: int, rounds: int, idle_timeout_s: float,
    duration: float, requests: int, workload: WorkloadOptions, out_dir: Path | None, force: bool,
    spec_path: Path | None, ledger_path: Path | None, as_json: bool, wait: bool,
) -> None:  # fmt: skip
    """Reproduce, localize, list the suspects, decide each by experiment, resolve and restore."""
    if as_json and not yes:
        raise click.UsageError("--json needs --yes (there is no one to confirm)")
    steps = _steps(sessions, rounds, idle_timeout_s, duration, requests, workload)
    cfg = InvestigateConfig(Symptom(symptom), steps, case_id, title, since, yes, max_minutes,
                            resume)  # fmt: skip
    where = SpecAndLedger(spec_path, ledger_path)

    spec_args: tuple[str, ...] = ()

    async def body(ledger: Ledger) -> tuple[InvestigateOutcome, Path | None]:
        nonlocal spec_args
        loaded = where.deployment()
        spec_args = loaded.spec_args
        _check_report(ledger, out_dir, force)
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            outcome = await investigate(op, ledger, cfg, tell=_tell, confirm=_confirm,
                                        phrase=phrase)  # fmt: skip
        stopped = outcome.stopped
        page = None if stopped else _write_report(ledger, outcome, out_dir, spec_args, force)
        return outcome, page

    outcome, page = run_with_ledger(where, lambda led: noting(body(led)), create=True, wait=wait,
                                    names_down=True)  # fmt: skip
    next_text = describe_action(outcome.next, outcome.state) if outcome.next else None
    if as_json:
        doc = investigate_json(outcome, next_text, str(page) if page else None, spec_args)
        print_json(encode(doc))
    else:
        for line in investigate_lines(outcome, next_text, spec_args):
            say(line)
        if page is not None:
            say(f"  incident report: {page}")
    if outcome.stopped or outcome.state.ending is not Ending.RESOLVED:
        raise SystemExit(EXIT_FAILED)
