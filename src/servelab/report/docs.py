"""Docs generated from the ledger alone: the perf plan (:mod:`servelab.report.perfplan`), one page
per case, plots, an HTML index.

:func:`build_docs` takes the ledger's export (``Ledger.export()``'s document, or its typed
:class:`~servelab.core.ledger.export.LedgerExport`) and returns ``{relative path: bytes}``; the
CLI's one writer saves them. Everything here is a pure function of the export, so
running it again after a verdict changes rewrites exactly the files that depend on that verdict.

The one-line wording of revert costs, restore plans, conviction tests and timeline entries lives
here too; the CLI prints the same sentences.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from servelab.core.bench.upgrade import stored_level
from servelab.core.case.abtest import AbTestRecord
from servelab.core.case.contract import RestoreAdvice, RestoreWhose
from servelab.core.case.experiment import ExperimentRecord
from servelab.core.case.model import (
    Case,
    EventOutcome,
    EvidenceAdded,
    KnobChanged,
    Opened,
    RestoreItem,
    Suspected,
    TimelineEntry,
    case_from_rows,
    restore_plan,
    restore_status,
    timeline,
)
from servelab.core.case.probe import BisectConclusion, BisectRecord, ProbeRecord
from servelab.core.case.record import CaseEvent, PutBackEvent, Resolution
from servelab.core.case.revert import ConcurrencyCost, ConvictionTest, RevertCost
from servelab.core.case.verdicts import Override
from servelab.core.investigate.state import InvestigationState, read_state
from servelab.core.ledger.codec import decode
from servelab.core.ledger.export import LedgerExport
from servelab.ops.case.case import CaseView
from servelab.report.case import (
    describe_bisect_event,
    describe_evidence,
    describe_experiment,
    describe_override,
    event_error,
)
from servelab.report.html import CaseRow, KnobRow, render_index
from servelab.report.investigation import describe_ab_test, describe_investigation
from servelab.report.pages import PageLink, html_page, markdown_html, run_markdown, soak_markdown
from servelab.report.perfplan import (
    COMPARISON_HEAD,
    KnobSummary,
    ab_markdown,
    comparison_rows,
    knob_summaries,
    perf_plan_markdown,
)
from servelab.report.plots import ab_plot, run_phase_plot
from servelab.report.putback import describe_put_back
from servelab.report.text import md_code, md_text, pct, safe_markdown, show_value

__all__ = [
    "build_docs",
    "case_markdown",
    "case_views",
    "describe_conviction",
    "describe_cost",
    "describe_point",
    "describe_restore_item",
    "describe_timeline_entry",
    "restore_hint",
    "restore_lines",
    "restore_plan_lines",
    "whose_revert",
]

PERF_PLAN = "perf-plan.md"
INDEX = "index.html"
_SIGNIFICANT = ("better", "worse")


# -- sentences -------------------------------------------------------------------------------


def describe_point(point: ConcurrencyCost) -> str:
    """``−11.3% at C64 (95% CI −13.8% … −9.1%)``, ``n.s. at C80``, ``inconclusive at C96``."""
    where = f"C{point.concurrency}"
    if point.verdict == "no significant difference":
        return f"n.s. at {where}"
    if point.change is None or point.verdict not in _SIGNIFICANT:
        return f"inconclusive at {where}"
    text = f"{pct(point.change)} at {where}"
    if point.ci is not None:
        level = f"{point.confidence * 100:g}%"
        text += f" ({level} CI {pct(point.ci[0])} … {pct(point.ci[1])})"
    return text


def describe_cost(cost: RevertCost) -> str:
    """The measured cost of a revert, biggest loss first; says so when nothing measured it."""
    if not cost.measured:
        return (
            f"not measured (no recorded A/B of {cost.service} {cost.knob} compares "
            f"{show_value(cost.from_value)} with {show_value(cost.to_value)})"
        )
    sig = [p for p in cost.points if p.verdict in _SIGNIFICANT and p.change is not None]
    sig.sort(key=lambda p: p.change or 0.0)
    rest = [p for p in cost.points if p not in sig]
    parts = [describe_point(p) for p in (*sig, *rest)]
    return ", ".join(parts) + f" (A/B #{cost.ab_id})"


def describe_restore_item(item: RestoreItem) -> str:
    """``decode K 256 → 512: reverted under case 3 on 2026-…; cost of the revert: …``."""
    text = (
        f"{item.service} {item.knob} {show_value(item.current)} → {show_value(item.restore_to)}: "
        f"reverted under case {item.case_id} on {item.reverted_at[:10]}; "
        f"cost of the revert: {describe_cost(item.cost)}"
    )
    if item.superseded_by is not None:
        text += f"; changed again since (change #{item.superseded_by}): check before restoring"
    return text


def whose_revert(whose: RestoreWhose, here: str) -> str:
    """Another deployment's revert (issue 38): whose, and where it is restored from."""
    if whose.spec_args is None:
        where = f"with -f the spec of {whose.other}"
    elif not whose.spec_args:
        where = "without -f, where no servelab.toml is (the embedded default spec)"
    else:
        where = f"with {shlex.join(whose.spec_args)}"
    return f"{whose.other}'s revert, not this deployment's ({here}): restore it {where}"


def restore_plan_lines(plan: Sequence[RestoreItem], advice: RestoreAdvice | None) -> list[str]:
    """Each restore plan item, another deployment's revert named (``advice``: seen from the spec
    given; None: it could not be read)."""
    whose = advice.whose if advice is not None else (None,) * len(plan)
    return [f"restore plan: {describe_restore_item(item)}"
            + ("" if w is None or advice is None else f"; {whose_revert(w, advice.here)}")
            for item, w in zip(plan, whose, strict=True)]  # fmt: skip


def restore_hint(case_id: int, advice: RestoreAdvice) -> str:
    """The ``restore`` command that would be accepted, or why none is (its reverts are more
    than one deployment's, or the other's spec was not recorded)."""
    if advice.spec_args is not None:
        words = ["servelab", "restore", str(case_id), *advice.spec_args]
        return f"apply it with: {shlex.join(words)}"
    whose = sorted({w.other for w in advice.whose if w is not None})
    if None in advice.whose:
        whose.insert(0, f"this deployment ({advice.here})")
    return (f"no one restore applies it: its reverts are {' and '.join(whose)}'s "
            "(each restored from its own deployment's spec)")  # fmt: skip


def restore_lines(case_id: int, plan: Sequence[RestoreItem], advice: RestoreAdvice) -> list[str]:
    """The restore plan's lines, then the ``restore`` that would be accepted (or why none is):
    what ``case resolve`` prints, and its ``--json`` carries."""
    return [*restore_plan_lines(plan, advice), restore_hint(case_id, advice)]


def describe_conviction(test: ConvictionTest) -> str:
    """What would convict the knob, and what the ledger already holds of it."""
    knob = test.target.split("/", 1)[-1]
    fail = ", ".join(f"#{i}" for i in test.failing_with) or "none"
    passing = ", ".join(f"#{i}" for i in test.passing_without) or "none"
    head = (
        f"to convict {test.target}: a soak that fails with {knob}={show_value(test.with_value)} "
        f"and passes with {knob}={show_value(test.without_value)}"
    )
    tail = "met" if test.met else "not met"
    return f"{head}; on record: failing with it {fail}, passing without it {passing} ({tail})"


def _outcome(outcome: EventOutcome) -> str:
    error = event_error(outcome)
    return "verified live" if error is None else f"FAILED ({error})"


def describe_timeline_entry(entry: TimelineEntry) -> str:
    """One line of a case's timeline."""
    match entry.data:
        case Opened(title=title):
            return f"case opened: {title}"
        case Suspected(target=target, reason=reason):
            return f"suspect {target}" + (f": {reason}" if reason else "")
        case EvidenceAdded(kind="note", note=note):
            return f"note: {note}"
        case EvidenceAdded(kind=kind, ref_id=ref_id):
            return describe_evidence(kind, ref_id)
        case KnobChanged() as c:
            return (
                f"knob change #{c.id}: {c.service} {c.name} "
                f"{show_value(c.old)} → {show_value(c.new)} ({c.reason or 'no reason'})"
            )
        case Resolution():
            return _describe_resolution(entry.data)
        case Mapping() as detail:
            return _describe_event(entry.kind, detail)
        case _:
            assert_never(entry.data)


def _describe_resolution(r: Resolution) -> str:
    verdicts = ", ".join(f"{t} {v}" for t, v in r.verdicts.items())
    later = f" (superseded {r.superseded_at})" if r.superseded_at else ""
    return f"resolved: root cause: {r.root_cause}" + (f"; {verdicts}" if verdicts else "") + later


def _describe_event(kind: str, d: Mapping[str, Any]) -> str:
    """A recorded case event, from its stored detail (read by its kind)."""
    if kind == Resolution.KIND:  # an earlier resolution
        return _describe_resolution(decode(Resolution, d))
    if kind in ("revert", "restore"):
        value = d.get("to", d.get("value"))
        outcome = _outcome(decode(EventOutcome, d))
        return f"{kind} {d.get('service')} {d.get('knob')} → {show_value(value)}: {outcome}"
    if kind == ExperimentRecord.KIND:
        return describe_experiment(decode(ExperimentRecord, d))
    if kind == BisectRecord.KIND:
        return describe_bisect_event(decode(BisectRecord, d))
    if kind == ProbeRecord.KIND:
        return describe_bisect_event(decode(ProbeRecord, d))
    if kind == BisectConclusion.KIND:
        return describe_bisect_event(decode(BisectConclusion, d))
    if kind == "override":
        return describe_override(decode(Override, d))
    if kind == InvestigationState.KIND:
        return describe_investigation(read_state(CaseEvent(kind=kind, at="", detail=d)))
    if kind == AbTestRecord.KIND:
        return describe_ab_test(decode(AbTestRecord, d))
    if kind == PutBackEvent.KIND:
        return describe_put_back(decode(PutBackEvent, d))
    return f"{kind}: {json.dumps(dict(d), sort_keys=True, default=str)}"


# -- case views from the export ----------------------------------------------------------------


def case_views(export: LedgerExport) -> list[CaseView]:
    """Every case of the export with its timeline, restore plan and restore status."""
    views = []
    for row in export.cases:
        mine = [c for c in export.knob_changes if c.case_id == row.id]
        case = case_from_rows(row, row.suspects, row.evidence, row.events, mine)
        plan = restore_plan(case, export.ab_runs, export.knob_changes)
        views.append(CaseView(case, timeline(case), plan, restore_status(case, plan)))
    return views


def _evidence_line(kind: str, ref_id: int | None, export: LedgerExport) -> str:
    found = {
        "run": {r.id: f"bench run #{r.id}: {r.label or 'unlabelled'}" for r in export.bench_runs},
        "ab": {r.id: f"A/B #{r.id}: {r.service} {r.knob}" for r in export.ab_runs},
    }
    for soak in export.soak_runs:
        layers = ", ".join(f.layer for f in soak.result.findings) or "none"
        word = "passed" if soak.ok else "FAILED"
        found.setdefault("soak", {})[soak.id] = f"soak #{soak.id}: {word}; findings: {layers}"
    for ver in export.verifications:
        failed = [c for c in ver.checks if not c.ok]
        word = "ok" if ver.ok else f"{len(failed)} check(s) failed"
        found.setdefault("verify", {})[ver.id] = f"verify #{ver.id}: {word}"
    line = found.get(kind, {}).get(ref_id) if ref_id is not None else None
    return line or f"{kind} #{ref_id} (not in this ledger)"


#: Evidence shown by its note: it names no record of another table (an experiment, a bisection's
#: probe and end are case events).
_NOTED = ("note", "experiment", "probe", "bisect", "ab_test")


def case_markdown(view: CaseView, export: LedgerExport) -> str:
    """One case: status, suspects and verdicts, evidence, timeline, restore plan and status. Every
    sentence holding user text (a title, a note, a reason, a knob value) goes in through
    :func:`~servelab.report.text.md_text`, a target through
    :func:`~servelab.report.text.md_code`: no user text opens a code span, a link or a tag."""
    case = view.case
    out = [f"# Case {case.id}: {md_text(case.title)}", ""]
    out += [f"- status: **{md_text(case.status)}**", f"- opened: {md_text(case.opened_at)}"]
    if case.root_cause:
        resolved = f"{case.root_cause} (resolved {case.resolved_at})"
        out.append(f"- root cause: {md_text(resolved)}")
    out += [f"- restore: **{md_text(view.restore_status)}**", "", "## Suspects", ""]
    out += _suspect_table(case)
    out += ["", "## Evidence", ""]
    out += [
        "- " + md_text(f"{e.at}: " + (f"{e.kind}: {e.note}" if e.kind in _NOTED else
                                      _evidence_line(e.kind, e.ref_id, export)))
        for e in case.evidence
    ] or ["(none)"]  # fmt: skip
    out += ["", "## Timeline", ""]
    out += [f"- {md_text(f'{e.at} — {describe_timeline_entry(e)}')}" for e in view.timeline]
    out += ["", "## Restore plan", ""]
    out += [f"- {md_text(describe_restore_item(i))}" for i in view.plan] or [
        f"({md_text(view.restore_status)})"
    ]
    return "\n".join(out) + "\n"


def _suspect_table(case: Case) -> list[str]:
    if not case.suspects:
        return ["(none)"]
    rows = ["| target | reason | verdict |", "|---|---|---|"]
    rows += [
        f"| {md_code(s.target, cell=True)} | {md_text(s.reason or '')} | "
        f"{md_text(s.verdict or 'open')} |"
        for s in case.suspects
    ]
    return rows


# -- the whole set ---------------------------------------------------------------------------


def _latest_verdicts(s: KnobSummary) -> str:
    if not s.ab_runs:
        return "no A/B"
    comps = s.ab_runs[-1].result.comparisons
    return ", ".join(f"C{c.concurrency}: {c.verdict}" for c in comps) or "—"


def build_docs(export: LedgerExport) -> dict[str, bytes]:
    """Every generated file, ``{relative path: bytes}``: perf plan, cases, plots, index.html;
    from the typed export (``ledger export``'s document reads back as one: ``decode``)."""
    views = case_views(export)
    summaries = knob_summaries(export, views)
    files: dict[str, bytes] = {}
    plots: dict[int, str] = {}
    for s in summaries:
        for ab in s.ab_runs:
            plots[ab.id] = f"plots/ab-{ab.id}.png"
            files[plots[ab.id]] = ab_plot(ab.result, title=f"A/B #{ab.id}: {ab.service} {ab.knob}")
    files[PERF_PLAN] = perf_plan_markdown(summaries, plots).encode()
    for view in views:
        files[f"cases/case-{view.case.id}.md"] = case_markdown(view, export).encode()
    knob_rows = [
        KnobRow(s.service, s.knob,
                show_value(s.live.value) if s.live is not None else "not verified",
                show_value(s.file_value), _latest_verdicts(s),
                [plots[a.id] for a in s.ab_runs],
                [(f"A/B #{a.id}: {s.service} {s.knob}",
                  [COMPARISON_HEAD, *comparison_rows(a.result)]) for a in s.ab_runs])
        for s in summaries
    ]  # fmt: skip
    case_rows = [
        CaseRow(v.case.id, v.case.title, v.case.status, v.restore_status, v.case.root_cause,
                f"cases/case-{v.case.id}.html", [describe_restore_item(i) for i in v.plan])
        for v in views
    ]  # fmt: skip
    sections = _run_pages(export, files, plots)
    plot_bytes = {path: data for path, data in files.items() if path.startswith("plots/")}
    _html_twins(files, plot_bytes)
    files[INDEX] = render_index(
        knob_rows, case_rows, plot_bytes, _html_name(PERF_PLAN), sections=sections
    ).encode()
    return files


def _html_name(md_path: str) -> str:
    return md_path[:-3] + ".html"


def _run_pages(
    export: LedgerExport, files: dict[str, bytes], plots: Mapping[int, str]
) -> list[tuple[str, list[PageLink]]]:
    """A page per bench run, soak and A/B (markdown; their HTML twins come after)."""
    runs, soaks, abs_ = [], [], []
    for run in export.bench_runs:
        path = f"runs/run-{run.id}.md"
        png = run_phase_plot(run)
        if png is not None:
            files[f"plots/run-{run.id}-ttft.png"] = png
        img = None if png is None else f"../plots/run-{run.id}-ttft.png"
        files[path] = run_markdown(run, img).encode()
        level = stored_level(run)
        conc = "?" if level is None else level.concurrency
        runs.append(
            PageLink(f"#{run.id} C{conc} {run.label or ''}".strip(), _html_name(path), run.at)
        )
    for soak in export.soak_runs:
        path = f"soaks/soak-{soak.id}.md"
        files[path] = soak_markdown(soak).encode()
        outcome = {True: "passed", False: "failed", None: "unknown"}[soak.ok]
        soaks.append(PageLink(f"#{soak.id} {outcome}", _html_name(path), soak.at))
    for ab in export.ab_runs:
        path = f"ab/ab-{ab.id}.md"
        plot = f"../{plots[ab.id]}" if ab.id in plots else None
        files[path] = ab_markdown(ab, plot).encode()
        abs_.append(PageLink(f"#{ab.id} {ab.service} {ab.knob}", _html_name(path), ab.at))
    return [("A/B experiments", abs_), ("Bench runs", runs), ("Soaks", soaks)]


def _html_twins(files: dict[str, bytes], plot_bytes: Mapping[str, bytes]) -> None:
    """Every markdown page gets an HTML twin with its plots inline (from any directory)."""
    images = {**plot_bytes, **{f"../{k}": v for k, v in plot_bytes.items()}}
    for path in [p for p in files if p.endswith(".md")]:
        files[path] = (md := safe_markdown(files[path].decode())).encode()
        title = next((ln.lstrip("# ") for ln in md.splitlines() if ln.startswith("#")), path)
        files[_html_name(path)] = html_page(title, markdown_html(md, images)).encode()
