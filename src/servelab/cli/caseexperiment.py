"""``servelab case test`` and ``servelab case bisect``: the case commands that decide by
experiment (:mod:`servelab.ops.case.experiment`, :mod:`servelab.ops.case.bisect`), recorded on the
case. :mod:`servelab.cli.case` adds them to the ``case`` group; the rules of every case command
(``--ledger``, ``--json``, the exit codes) are the group's.
"""

from __future__ import annotations

from pathlib import Path

import click

from servelab.cli.boundary import err_console, json_option, print_json
from servelab.cli.common import (
    SpecAndLedger,
    ledger_option,
    run_with_ledger,
    say,
    show_progress,
    spec_option,
)
from servelab.cli.interrupted import noting
from servelab.cli.numbers import Finite, Whole
from servelab.cli.options import (
    IDLE_TIMEOUT,
    REQUESTS,
    REVERT_TO,
    SESSIONS,
    WARMUP,
    WorkloadOptions,
    wait_option,
    workload_options,
)
from servelab.cli.sharedoption import Default, Parsed
from servelab.core.answers.contract import AnswersConfig, AnswersUnchecked
from servelab.core.bench.contract import BenchConfig
from servelab.core.case.bisect import Change
from servelab.core.case.experiment import ExperimentRecord
from servelab.core.case.probe import TEST_FORM, ProbeTestKind, parse_probe_test
from servelab.core.options import CHANGE_FORM, parse_change
from servelab.io.ledger.ledger import Ledger
from servelab.ops.case import bisect as bisection
from servelab.ops.case import experiment as casetest
from servelab.ops.case.answers import bisect_answers
from servelab.ops.context import Operation
from servelab.report.answers import unchecked_phrase
from servelab.report.case import (
    bisect_json,
    bisect_lines,
    describe_bisected,
    describe_evidence,
    describe_experiment,
    experiment_json,
    experiment_lines,
)

__all__ = ["experiments"]

#: ``case test`` and ``case bisect``, gathered here for :mod:`servelab.cli.case` to add to the
#: ``case`` group (a holder, never a command of its own).
experiments = click.Group("case")


@experiments.command("test")
@click.argument("case_id", type=Whole())
@click.argument("target")
@click.option("--rounds", default=3, show_default=True, type=Whole(1, 50),
              help="Visits per arm (ABBA order).")  # fmt: skip
@REVERT_TO.option()
@SESSIONS.option(Default(None, "each visit runs the failing soak's sessions"))
@click.option("--alpha", default=0.05, show_default=True, type=Finite(), help="Significance level.")
@click.option("--effect", default=0.5, show_default=True, type=Finite(),
              help="The meaningful drop in failure rate the exoneration must exclude.")  # fmt: skip
@click.option("--test", "test_text", default="soak", show_default=True, metavar="TEST",
              help=f"What tells good from bad: {TEST_FORM}. Default here: the case's failing "
              "soak replayed (a threshold is for case bisect).")  # fmt: skip
@click.option("--runs", default=3, show_default=True, type=Whole(1, 50),
              help="A threshold or answers test's bench runs per visit.")  # fmt: skip
@REQUESTS.option(Default("128", "an answers test runs often; each run carries 5% probes"))
@WARMUP.option(Default("4", "every visit follows a co-restart, so its first requests are cold"))
@workload_options()
@spec_option
@ledger_option
@json_option
@wait_option
def case_test(
    case_id: int,
    target: str,
    rounds: int,
    to_value: str | None,
    sessions: int | None,
    alpha: float,
    effect: float,
    test_text: str,
    runs: int,
    requests: int,
    warmup: int,
    workload: WorkloadOptions,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
    wait: bool,
) -> None:
    """Decide TARGET's verdict by experiment: the case's failing soak with and without it.

    A knob: its suspected value against its revert value, each visit set, co-restarted and proven
    live. A component in front of the router (a proxy): through it against straight to the
    router. With --test answers, a knob's arms are judged by their answers instead: bench runs
    at the level carrying greedy answer probes, a wrong answer (against the revert arm's
    references) a failure. Failure rates compared by Fisher's exact test; the outcome is recorded
    on the case. The knob is left as it was found.
    """
    test = parse_probe_test(test_text)
    bench = BenchConfig(
        url="", concurrencies=(max(test.concurrency, 1),), requests=requests, warmup=warmup,
        input_len=workload.input_len, output_len=workload.output_len, seed=workload.seed,
        endpoint=workload.endpoint, answers=AnswersConfig(),
    ) if test.kind is ProbeTestKind.ANSWERS else None  # fmt: skip
    cfg = casetest.CaseTestConfig(case_id, target, rounds, to_value, alpha, effect, sessions,
                                  test, bench, runs)  # fmt: skip
    where = SpecAndLedger(spec_path, ledger_path)

    async def body(ledger: Ledger) -> casetest.CaseTestOutcome:
        loaded = where.deployment()
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            return await casetest.run_case_test(op, ledger, cfg, up_first=True)

    outcome = run_with_ledger(where, lambda led: noting(body(led)), create=False, wait=wait,
                              names_down=True)  # fmt: skip
    if as_json:
        print_json(experiment_json(outcome))
        return
    say(describe_experiment(outcome.record))
    for line in experiment_lines(outcome.record):
        say(line)
    evidence = describe_evidence(ExperimentRecord.KIND, outcome.event_id)  # as `case show` says
    say(f"  recorded on case {case_id} as {evidence}")


@experiments.command("bisect")
@click.argument("case_id", type=Whole())
@click.option("--good", default=None, metavar="POINT",
              help="The state known good: a time, verify:ID or backup:PATH.")  # fmt: skip
@click.option("--bad", default="now", show_default=True, metavar="POINT",
              help="The state known bad: now, a time, verify:ID or backup:PATH.")  # fmt: skip
@click.option("--change", "changes", multiple=True, type=Parsed(CHANGE_FORM, parse_change),
              help="A change to bisect instead of those between --good and --bad "
              "(repeatable; an empty value: unset).")  # fmt: skip
@click.option("--test", "test_text", default=None, metavar="TEST",
              help=f"What tells good from bad: {TEST_FORM}.")  # fmt: skip
@click.option("--rounds", default=3, show_default=True, type=Whole(1, 50),
              help="Most rounds per probe (a visit of each arm per round).")  # fmt: skip
@click.option("--alpha", default=0.05, show_default=True, type=Finite(), help="Significance level.")
@click.option("--effect", default=0.5, show_default=True, type=Finite(),
              help="The meaningful drop in failure rate the exoneration must exclude.")  # fmt: skip
@SESSIONS.option(Default(None, "each visit runs the failing soak's sessions"))
@click.option("--runs", default=3, show_default=True, type=Whole(1, 50),
              help="A threshold or answers test's bench runs per visit.")  # fmt: skip
@REQUESTS.option(Default("128", "a threshold test runs often; a steady state needs a few per user"))
@WARMUP.option(Default("4", "every visit follows a co-restart, so its first requests are cold"))
@IDLE_TIMEOUT.option()
@workload_options()
@click.option("--answers", "answers_mode", type=click.Choice(["gate", "off"]), default="gate",
              show_default=True, help="A threshold test's runs carry answer probes too: a run with "
              "a wrong answer fails however fast (off: speed alone).")  # fmt: skip
@click.option("--resume", is_flag=True, help="Go on with the case's unfinished bisection.")
@spec_option
@ledger_option
@json_option
@wait_option
def case_bisect(
    case_id: int,
    good: str | None,
    bad: str,
    changes: tuple[tuple[str, str, str | None, str | None], ...],
    test_text: str | None,
    rounds: int,
    alpha: float,
    effect: float,
    sessions: int | None,
    runs: int,
    requests: int,
    warmup: int,
    idle_timeout_s: float,
    workload: WorkloadOptions,
    answers_mode: str,
    resume: bool,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
    wait: bool,
) -> None:
    """Find which changes between a good and a bad state make it bad: delta debugging, each probe
    a controlled experiment against the bad state, recorded on the case.

    The changes: every declared knob that differs between --good and --bad (the ledger's knob
    history, a verification, a backup), or --change. The test: the case's failing soak replayed
    (soak), or bench runs against a threshold. Ctrl-C keeps the probes done; --resume goes on.
    """
    where = SpecAndLedger(spec_path, ledger_path)
    cfg = None
    if not resume:
        if test_text is None:
            raise click.UsageError(f"--test {TEST_FORM} is required (or --resume)")
        test = parse_probe_test(test_text)
        if isinstance(
            answers := bisect_answers(test, answers_mode == "gate", requests), AnswersUnchecked
        ):
            err_console.print(unchecked_phrase(answers), style="yellow")
        bench = BenchConfig(
            url="", concurrencies=(max(test.concurrency, 1),), requests=requests, warmup=warmup,
            idle_timeout_s=idle_timeout_s, input_len=workload.input_len,
            output_len=workload.output_len, seed=workload.seed, endpoint=workload.endpoint,
            answers=None if isinstance(answers, AnswersUnchecked) else answers,
        ) if test.kind is not ProbeTestKind.SOAK else None  # fmt: skip
        listed = tuple(Change(*c) for c in changes)
        cfg = bisection.BisectConfig(case_id, test, good, bad, listed, rounds, alpha, effect,
                                     sessions, bench, runs)  # fmt: skip

    async def body(ledger: Ledger) -> bisection.BisectOutcome:
        loaded = where.deployment()
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            if cfg is None:
                return await bisection.resume_bisect(op, ledger, case_id)
            return await bisection.run_bisect(op, ledger, cfg)

    outcome = run_with_ledger(where, lambda led: noting(body(led)), create=False, wait=wait,
                              names_down=True)  # fmt: skip
    if as_json:
        print_json(bisect_json(outcome))
        return
    say(describe_bisected(outcome.start, outcome.conclusion))
    for line in bisect_lines(outcome):
        say(line)
    say(f"  recorded on case {case_id} as evidence #{outcome.evidence_id}")
