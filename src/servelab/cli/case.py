"""``servelab case …``, ``servelab restore`` and ``servelab report``; ``case test`` and
``case bisect`` are defined in :mod:`servelab.cli.caseexperiment` and added to the group here.

Every command takes ``--ledger PATH`` (else ``$SERVELAB_LEDGER``, else ``<state_dir>/ledger.db`` of
the spec) and ``--json``. Bad input (unknown case, bad target, wrong state) exits 2; a revert or
restore whose verify fails exits 1. Only ``case open`` creates a ledger: the others (they read it,
or need a case already in it) refuse one that does not exist (exit 1) and create nothing.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

import click

from servelab.cli import LazyCommand
from servelab.cli.boundary import EXIT_FAILED, err_console, json_option, print_json
from servelab.cli.common import (
    SpecAndLedger,
    ledger_option,
    run_with_ledger,
    say,
    show_progress,
    spec_option,
)
from servelab.cli.freetext import stored_text
from servelab.cli.numbers import Whole
from servelab.cli.options import FORCE_HELP, REVERT_TO, wait_option
from servelab.core.case.contract import (
    RestoreAdvice,
    RestoreOutcome,
    RevertOutcome,
    RevertPreview,
)
from servelab.core.case.model import CASE_RESOLVED, Case
from servelab.errors import SpecError
from servelab.io.ledger.ledger import Ledger
from servelab.io.outdir import write_out_dir
from servelab.ops.case import case as cases
from servelab.ops.case.whose import restore_advice
from servelab.ops.context import Operation
from servelab.report.case import (
    case_json,
    case_list_json,
    restore_error,
    restore_json,
    revert_json,
    revert_lines,
)
from servelab.report.docs import (
    build_docs,
    describe_conviction,
    describe_cost,
    describe_restore_item,
    describe_timeline_entry,
    restore_lines,
    restore_plan_lines,
)

__all__ = [
    "EXPERIMENTS",
    "EXPERIMENT_NAMES",
    "CaseGroup",
    "case_group",
    "report_cmd",
    "restore_cmd",
]

#: ``--force``'s help on the commands that write a knob back (``restore``, ``case revert``).
HAND_EDIT_HELP = "Write the knob back even if its file was edited by hand since servelab wrote it."


# -- case ------------------------------------------------------------------------------------


#: ``case test`` and ``case bisect``: their group, imported when one of them is asked for (the load,
#: answers and bisect machinery, aiohttp with it: about half a second of CPU that ``case open``,
#: ``show``, ``list``... do not pay).
EXPERIMENTS = LazyCommand("servelab.cli.caseexperiment:experiments", "case test, case bisect")
EXPERIMENT_NAMES = ("bisect", "test")


class CaseGroup(click.Group):
    """``case``: its own commands, and the experiments of :data:`EXPERIMENTS` loaded on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *EXPERIMENT_NAMES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in EXPERIMENT_NAMES and cmd_name not in self.commands:
            loaded = EXPERIMENTS.load()
            found = loaded.commands if isinstance(loaded, click.Group) else {}
            for name, command in found.items():
                self.add_command(command, name)
        return self.commands.get(cmd_name)


@click.group("case", cls=CaseGroup)
def case_group() -> None:
    """Investigate an incident: suspects, evidence, reverts with their cost, verdicts."""


@case_group.command("open")
@click.argument("title", callback=stored_text)
@spec_option
@ledger_option
@json_option
def case_open(title: str, spec_path: Path | None, ledger_path: Path | None, as_json: bool) -> None:
    """Open a case; prints its id."""

    async def body(ledger: Ledger) -> int:
        return cases.open_case(ledger, title)

    cid = run_with_ledger(SpecAndLedger(spec_path, ledger_path), body)
    if as_json:
        print_json({"id": cid, "title": title, "status": "open"})
    else:
        say(f"case {cid} opened: {title}")


@case_group.command("suspect")
@click.argument("case_id", type=Whole())
@click.argument("target")
@click.option("--reason", required=True, help="Why it is suspected.", callback=stored_text)
@spec_option
@ledger_option
@json_option
def case_suspect(
    case_id: int,
    target: str,
    reason: str,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Suspect TARGET: knob:SERVICE/NAME or component:NAME (proxy, router, ...)."""

    where = SpecAndLedger(spec_path, ledger_path)

    async def body(ledger: Ledger) -> int:
        return cases.add_suspect(ledger, case_id, target, reason, spec=where.spec().spec)

    sid = run_with_ledger(where, body, create=False)
    if as_json:
        print_json({"id": sid, "case_id": case_id, "target": target.strip(), "reason": reason})
    else:
        say(f"case {case_id}: suspect {target.strip()}")


@case_group.command("evidence")
@click.argument("case_id", type=Whole())
@click.option("--run", "run_id", type=Whole(), help="A recorded bench run.")
@click.option("--verify", "verify_id", type=Whole(), help="A recorded verification.")
@click.option("--soak", "soak_id", type=Whole(), help="A recorded soak.")
@click.option("--ab", "ab_id", type=Whole(), help="A recorded A/B experiment.")
@click.option("--note", help="A note (what someone observed).", callback=stored_text)
@spec_option
@ledger_option
@json_option
def case_evidence(
    case_id: int,
    run_id: int | None,
    verify_id: int | None,
    soak_id: int | None,
    ab_id: int | None,
    note: str | None,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Attach exactly one of --run/--verify/--soak/--ab ID or --note TEXT to the case."""
    given = {"run": run_id, "verify": verify_id, "soak": soak_id, "ab": ab_id}
    chosen: list[tuple[str, int | None]] = [(k, v) for k, v in given.items() if v is not None]
    if note is not None:
        chosen.append(("note", None))
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --run, --verify, --soak, --ab, --note")
    kind, ref = chosen[0]

    async def body(ledger: Ledger) -> int:
        return cases.add_evidence(ledger, case_id, kind, ref, note)

    eid = run_with_ledger(SpecAndLedger(spec_path, ledger_path), body, create=False)
    if as_json:
        print_json({"id": eid, "case_id": case_id, "kind": kind, "ref_id": ref, "note": note})
    else:
        say(f"case {case_id}: evidence {kind}" + (f" #{ref}" if ref else ""))


def _print_preview(preview: RevertPreview) -> None:
    say(
        f"revert {preview.service} {preview.knob} {preview.current} → {preview.revert_to} "
        f"under case {preview.case_id}"
    )
    say(f"  cost of the revert: {describe_cost(preview.cost)}")
    say(f"  {describe_conviction(preview.conviction)}")


@case_group.command("revert")
@click.argument("case_id", type=Whole())
@click.argument("target")
@REVERT_TO.option()
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--force", is_flag=True, help=HAND_EDIT_HELP)
@spec_option
@ledger_option
@json_option
@wait_option
def case_revert(
    case_id: int,
    target: str,
    to_value: str | None,
    yes: bool,
    force: bool,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
    wait: bool,
) -> None:
    """Revert a suspect knob: shows its measured cost first, then sets, restarts, verifies.

    The restart is the changed service and its dependents in start order (as ``restart`` plans it).
    """
    if as_json and not yes:
        raise click.UsageError("--json needs --yes (there is no one to confirm)")

    where = SpecAndLedger(spec_path, ledger_path)

    async def body(ledger: Ledger) -> RevertOutcome | None:
        loaded = where.deployment()
        cases.check_revert_to(loaded.spec, target, to_value)  # before asking: nothing changed
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            current = await cases.current_value(op, target)
            preview = cases.revert_preview(
                ledger, case_id, target, current=current, to=to_value, deployment=op.loaded
            )
            if not as_json:
                _print_preview(preview)
            if not yes and not click.confirm("revert it?", default=False, err=True):
                return None
            return await cases.revert(op, ledger, preview, force=force)

    from servelab.cli.interrupted import noting  # the put-back's machinery: only when it runs

    outcome = run_with_ledger(where, lambda led: noting(body(led)), create=False, wait=wait)
    if outcome is None:
        err_console.print("not reverted")
        raise SystemExit(EXIT_FAILED)
    if as_json:
        print_json(revert_json(outcome))
    else:
        for line in revert_lines(outcome):
            say(line)
    if not outcome.ok:
        raise SystemExit(EXIT_FAILED)


@case_group.command("resolve")
@click.argument("case_id", type=Whole())
@click.option("--root-cause", required=True, help="What the cause was.", callback=stored_text)
@click.option("--exonerate", multiple=True, help="A target cleared of suspicion (repeatable).")
@click.option("--convict", multiple=True, help="A target found guilty (repeatable).")
@click.option("--override", "override", default=None, metavar="REASON",
              help="Give verdicts the evidence refuses; the reason is recorded.",
              callback=stored_text)  # fmt: skip
@spec_option
@ledger_option
@json_option
def case_resolve(
    case_id: int,
    root_cause: str,
    exonerate: tuple[str, ...],
    convict: tuple[str, ...],
    override: str | None,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
) -> None:
    """Resolve the case; prints the restore plan of every exonerated knob.

    A verdict the case's evidence refuses (an exoneration a ``case test`` or a soak pair
    contradicts, a conviction nothing supports) exits 2 naming the evidence ids, unless
    ``--override REASON``.
    """

    async def body(ledger: Ledger) -> tuple[cases.CaseView, Case]:
        before = cases.load_case(ledger, case_id)
        view = cases.resolve_case(
            ledger, case_id, root_cause, exonerate, convict, override=override
        )
        return view, before

    where = SpecAndLedger(spec_path, ledger_path)
    view, before = run_with_ledger(where, body, create=False)
    if as_json:  # the restore advice the text shows, as data and as its lines
        advice = restore_advice(where.spec(), view.case, view.plan) if view.plan else None
        lines = None if advice is None else restore_lines(case_id, view.plan, advice)
        print_json(case_json(view, advice, lines))
        return
    if before.status == CASE_RESOLVED:
        say(f"case {case_id} resolved again: {root_cause}")
        say(f"  the earlier resolution ({before.root_cause}) is kept in its timeline")
    else:
        say(f"case {case_id} resolved: {root_cause}")
    if view.plan:  # the spec read only for a plan, as before
        advice = restore_advice(where.spec(), view.case, view.plan)
        for line in restore_lines(case_id, view.plan, advice):
            say(f"  {line}")


def _print_case(view: cases.CaseView, advice: RestoreAdvice | None) -> None:
    case = view.case
    say(f"case {case.id}: {case.title} ({case.status}; {view.restore_status})")
    if case.root_cause:
        say(f"root cause: {case.root_cause}")
    for s in case.suspects:
        say(f"  suspect {s.target}: {s.verdict or 'open'}" + (f" — {s.reason}" if s.reason else ""))
    for entry in view.timeline:
        say(f"  {entry.at}  {describe_timeline_entry(entry)}")
    for line in restore_plan_lines(view.plan, advice):
        say(f"  {line}")


@case_group.command("show")
@click.argument("case_id", type=Whole())
@spec_option
@ledger_option
@json_option
def case_show(
    case_id: int, spec_path: Path | None, ledger_path: Path | None, as_json: bool
) -> None:
    """The case's timeline, suspects, verdicts and restore status."""

    async def body(ledger: Ledger) -> cases.CaseView:
        return cases.view_case(ledger, case_id)

    where = SpecAndLedger(spec_path, ledger_path)
    view = run_with_ledger(where, body, create=False, reads_only=True)
    if as_json:
        print_json(case_json(view))
    else:
        _print_case(view, _advice(where, view))


def _advice(where: SpecAndLedger, view: cases.CaseView) -> RestoreAdvice | None:
    """Whose each plan item's revert is, seen from the spec (None: no plan, or no spec read)."""
    with suppress(SpecError):  # ``case show`` reads the ledger and needs no spec
        return restore_advice(where.spec(), view.case, view.plan) if view.plan else None
    return None


@case_group.command("list")
@spec_option
@ledger_option
@json_option
def case_list(spec_path: Path | None, ledger_path: Path | None, as_json: bool) -> None:
    """Every case with its status."""

    async def body(ledger: Ledger) -> list[cases.CaseView]:
        return cases.list_cases(ledger)

    views = run_with_ledger(
        SpecAndLedger(spec_path, ledger_path), body, create=False, reads_only=True
    )
    if as_json:
        print_json(case_list_json(views))
        return
    for v in views:
        say(f"{v.case.id:>4}  {v.case.status:<9} {v.restore_status:<22} {v.case.title}")


# -- restore, report, ledger -----------------------------------------------------------------


@click.command("restore")
@click.argument("case_id", type=Whole())
@click.option("--force", is_flag=True, help=HAND_EDIT_HELP)
@spec_option
@ledger_option
@json_option
@wait_option
def restore_cmd(
    case_id: int,
    force: bool,
    spec_path: Path | None,
    ledger_path: Path | None,
    as_json: bool,
    wait: bool,
) -> None:
    """Apply a resolved case's restore plan: set, co-restart in order, verify live + e2e.

    The restart is the changed services and their dependents in start order (as ``restart`` plans).
    A knob whose file was edited by hand since servelab last wrote it is refused (exit 2, naming
    the file and the key) before anything is written, unless ``--force``.
    """

    where = SpecAndLedger(spec_path, ledger_path)

    async def body(ledger: Ledger) -> RestoreOutcome:
        loaded = where.deployment()
        view = cases.view_case(ledger, case_id)
        if not as_json and not cases.already_restored(view):
            for item in view.plan:
                say(f"restore: {describe_restore_item(item)}")
        async with Operation(loaded, ledger=ledger, progress=show_progress) as op:
            return await cases.restore(op, ledger, case_id, force=force)

    from servelab.cli.interrupted import noting  # the put-back's machinery: only when it runs

    outcome = run_with_ledger(where, lambda led: noting(body(led)), create=False, wait=wait)
    if as_json:
        print_json(restore_json(outcome))
    elif outcome.already_restored:
        say(f"case {case_id}: nothing to restore: already {outcome.status}")
    else:
        error = restore_error(outcome)
        say(f"case {case_id}: {outcome.status}" + (f" ({error})" if error else ""))
    if not outcome.ok:
        raise SystemExit(EXIT_FAILED)


@click.command("report")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Directory for the docs (default: report/ next to the ledger).")  # fmt: skip
@click.option("--force", is_flag=True, help=FORCE_HELP)
@spec_option
@ledger_option
@json_option
def report_cmd(
    out_dir: Path | None, force: bool, spec_path: Path | None, ledger_path: Path | None,
    as_json: bool,
) -> None:  # fmt: skip
    """Write the perf plan, one page per case, plots and an HTML index, from the ledger alone."""

    async def body(ledger: Ledger) -> tuple[Path, list[str], list[str]]:
        target = out_dir or ledger.path.parent / "report"
        docs = build_docs(ledger.snapshot(records=False))
        written, unchanged = write_out_dir(target, docs, force)
        return target, written, unchanged

    where = SpecAndLedger(spec_path, ledger_path)
    target, written, unchanged = run_with_ledger(where, body, create=False, reads_only=True)
    if as_json:
        print_json({"out": str(target), "index": str(target / "index.html"),
                    "written": written, "unchanged": unchanged})  # fmt: skip
        return
    say(f"report in {target}: {len(written)} file(s) written, {len(unchanged)} unchanged")
    for rel in written:
        say(f"  {rel}")
