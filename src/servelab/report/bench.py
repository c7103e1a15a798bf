"""Bench results as text: a rich table, markdown, CSV, per-request JSONL, a JSON document.
Renderers only return values (``str``, a rich ``Table``, JSON-ready dicts); the CLI writes them."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator

from rich.table import Table

from servelab.core.bench.contract import BenchResult, LevelSummary
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.load.bursts import burst_places
from servelab.core.load.proxyroute import ProxyRoute
from servelab.core.load.records import RequestRecord
from servelab.core.stats import PERCENTILE_METHOD, Interval, Summary
from servelab.core.telemetry.rules import QUIET, UNKNOWN, TelemetryEvidence, run_evidence
from servelab.core.telemetry.traces import TraceSummary
from servelab.core.telemetry.unknown import TOO_SHORT
from servelab.report.jsontext import json_text
from servelab.report.plots import load_ttft_plot, ttft_phase_plot
from servelab.report.route import route_text
from servelab.report.runnotes import evidence_lines, return_note
from servelab.report.slo import cache_text, slo_rows
from servelab.report.soak.words import unknown_text
from servelab.report.text import csv_text_cell, level_label, safe_markdown, url_text

__all__ = [
    "CLIENT_REASONS",
    "EXPORT_NAMES",
    "client_warnings",
    "export_files",
    "failure_lines",
    "load_plot",
    "nothing_sent_line",
    "notices",
    "phase_lines",
    "phase_markdown",
    "phase_plot",
    "phase_table",
    "recorded_line",
    "records_jsonl_chunks",
    "result_json",
    "return_lines",
    "sessions_csv",
    "summary_csv",
    "summary_markdown",
    "summary_table",
    "telemetry_lines",
]

CLIENT_REASONS = {
    "loop-lag": "event-loop lag p99 above 5 ms: the client was late reading streams",
    "cpu-busy": "client CPU above 70% of one core: the client may be the bottleneck",
    "dispatch-delay": "dispatch delay p99 above 5 ms: requests left later than scheduled",
}

_DIST = ("ttft_ms", "itl_ms", "gap_ms", "tpot_ms", "e2e_ms", "dispatch_ms")


def _f(value: float | None, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:,.{digits}f}"


def _ci(ci: Interval) -> str:
    if not ci.conclusive:
        return f"inconclusive (n={ci.n})"
    return f"[{_f(ci.low)}, {_f(ci.high)}]"


def _dist(s: Summary) -> str:
    return f"{_f(s.mean)} ± {_f(s.std)} | {_f(s.median)} | {_f(s.p90)} | {_f(s.p99)}"


def _rows(level: LevelSummary) -> list[tuple[str, str]]:
    t = level.throughput
    return [
        ("output tok/s", f"{_f(t.mean)} ± {_f(t.std)} (n={t.n} runs)"),
        ("  95% CI (Student-t)", _ci(level.throughput_ci)),
        ("steady-state tok/s", _steady(level.steady_throughput)),
        ("requests ok / sent", f"{level.n_ok} / {level.n_requests}"),
        ("TTFT ms", _dist(level.ttft_ms)),
        ("ITL per-request ms", _dist(level.itl_ms)),
        ("ITL per-gap ms", _dist(level.gap_ms)),
        ("TPOT ms", _dist(level.tpot_ms)),
        ("E2E ms", _dist(level.e2e_ms)),
        ("dispatch delay ms", _dist(level.dispatch_ms)),
        ("client CPU ms/token", _f(level.client.cpu_ms_per_token, 4)),
        (
            "loop lag p99 / max ms",
            f"{_f(level.client.loop_lag_p99_ms, 2)} / {_f(level.client.loop_lag_max_ms, 2)}",
        ),
        ("prefix cache hit rate", cache_text(level.cache)),
        *_slo(level),
        *_answers(level),
    ]


def _answers(level: LevelSummary) -> list[tuple[str, str]]:
    """The answer probes' rows (none without ``--check-answers``)."""
    a = level.answers
    if a is None:
        return []
    if a.unchecked:
        why = f"all {a.cut} probes cut" if a.cut else "no probe sent"
        return [("answers wrong / probes", f"not checked: {why} by the run's end")]
    failures = ", ".join(f"{code} {n}" for code, n in a.failures) or "none"
    top1 = "n/a" if a.top1_agree is None else f"{a.top1_agree * 100:.1f}%"
    cut = f"; {a.cut} cut by the run's end, not judged" if a.cut else ""
    return [
        ("answers wrong / probes", f"{a.wrong} / {a.answers} ({a.differ} differ from C1{cut})"),
        ("answers: structural failures", failures),
        ("answers: retrieval recall", f"{a.recalled} / {a.retrieval}" if a.retrieval else "n/a"),
        ("answers: top-1 agreement", top1),
    ]


def _slo(level: LevelSummary) -> list[tuple[str, str]]:
    """The goodput and the SLO's rows (none without an SLO)."""
    if level.slo is None:
        return []
    return [("goodput req/s", _f(level.goodput, 2)), *slo_rows(level.slo)]


def _steady(s: Summary) -> str:
    return f"{_f(s.mean)} ± {_f(s.std)} (n={s.n} runs)" if s.n else "n/a (< 2×C requests)"


def _title(result: BenchResult, tail: str) -> str:  # its --label, else its URL as shown
    return f"bench {result.config.label or url_text(result.config.url)}{tail}"


def summary_table(result: BenchResult) -> Table:
    """One column per concurrency; distributions as mean ± σ | median | p90 | p99."""
    title = _title(result, " (INTERRUPTED, partial)" if result.interrupted else "")
    path = route_text(result.config.route or ProxyRoute())
    table = Table(title=title, caption=f"percentiles: {PERCENTILE_METHOD}; path: {path}")
    table.add_column("metric (mean ± σ | median | p90 | p99)")
    for level in result.levels:
        table.add_column(level_label(level.concurrency), justify="right")
    names = [name for name, _ in _rows(result.levels[0])] if result.levels else []
    per_level = [dict(_rows(level)) for level in result.levels]
    for name in names:
        table.add_row(name, *(cells[name] for cells in per_level))
    if result.config.trace is not None and len(result.levels) == 1:
        for name, cell in _burst_rows([r for run in result.runs for r in run.records]):
            table.add_row(name, cell)
    return table


def _burst_rows(records: list[RequestRecord]) -> list[tuple[str, str]]:
    """A replay's dispatch delay by place in a burst (none without bursts): the client's
    lateness, as no server can delay a send."""
    return [
        (f"dispatch delay ms, {_place(p.first, p.last)} in a burst (client)", _dist(p.dispatch_ms))
        for p in burst_places(records)
    ]


def _place(first: int, last: int | None) -> str:
    if first == last:
        return _nth(first)
    return f"{_nth(first)}–{_nth(last)}" if last is not None else f"{_nth(first)} on"


def _nth(n: int) -> str:
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10 if n % 100 not in (11, 12, 13) else 0, "th")
    return f"{n}{suffix}"


def failure_lines(result: BenchResult) -> list[str]:
    """One line per concurrency with failures: how many and why (the cut: :func:`notices`)."""
    lines = []
    for level in result.levels:
        if level.failures:
            why = ", ".join(f"{n} {reason}" for reason, n in level.failures.items())
            lines.append(f"{level_label(level.concurrency)}: {level.failed} failed ({why})")
    return lines


def notices(result: BenchResult) -> list[tuple[str, str]]:
    """What bench says on stderr after its table (before its failures), as (label, line); a
    level where the engine's ``usage`` counts were not believed says so, and one whose requests
    the run's end cut (``cut:``, not a failure)."""
    usage = [
        f"{level_label(level.concurrency)}: {level.usage_disagreed} request(s): the engine's "
        "token counts were not believable (negative, not whole, or far from what it streamed); "
        "its streamed content events were counted instead"
        for level in result.levels
        if level.usage_disagreed
    ]
    cut = [f"{level_label(level.concurrency)}: {level.n_cut} cut by the run's end (--deadline or a "
           "stop), not counted as failures" for level in result.levels if level.n_cut]  # fmt: skip
    labelled = (
        ("untraced:", phase_lines(result)),
        ("return phase:", return_lines(result)),
        ("run telemetry:", telemetry_lines(result)),
        ("client warning:", client_warnings(result)),
        ("usage disagreed:", usage),
        ("cut:", cut),  # last, before the failures: never one of them
    )
    return [(label, line) for label, lines in labelled for line in lines]


def nothing_sent_line(result: BenchResult) -> str | None:
    """Why a bench that sent no request failed (``--deadline 1e-300`` passed before the first
    send); None: it sent some."""
    if any(level.n_requests for level in result.levels):
        return None
    return "no request was sent before the run's end (--deadline or a stop): nothing measured"


def recorded_line(result: BenchResult, ledger: str) -> str | None:
    """Which ledger rows hold the runs (``case evidence --run ID`` takes one); None: none
    recorded."""
    ids = [f"#{run.run_id}" for run in result.runs if run.run_id is not None]
    if not ids:
        return None
    return f"recorded bench run{'s' if len(ids) > 1 else ''} {', '.join(ids)} in {ledger}"


def client_warnings(result: BenchResult) -> list[str]:
    """Why the client may have been the bottleneck, per concurrency."""
    return [
        f"{level_label(level.concurrency)}: {CLIENT_REASONS.get(reason, reason)}"
        for level in result.levels
        for reason in level.client.reasons
    ]


def result_json(result: BenchResult) -> str:
    """``bench --json``: the result's encoding (config, levels, failed), the percentile method
    its distributions used, and a replayed trace's conversations tagged with their repeat."""
    doc: JsonObject = {**encode(result), "percentile_method": PERCENTILE_METHOD}
    doc["path"] = route_text(result.config.route or ProxyRoute())
    sessions = [
        {"repeat": run.repeat_index, **encode(s)} for run in result.runs for s in run.sessions
    ]
    if sessions:
        doc["sessions"] = sessions
    return json_text(doc)


def _traced(result: BenchResult) -> list[tuple[int, TraceSummary]]:
    return [(lv.concurrency, lv.traces) for lv in result.levels if lv.traces is not None]


def _phase_rows(result: BenchResult) -> tuple[list[str], list[list[str]]]:
    """Head and rows of the phase table: one row per phase, p50 / p90 / p99 per concurrency."""
    traced = _traced(result)
    head = ["TTFT phase ms (p50 / p90 / p99)", *(level_label(c) for c, _ in traced)]
    names = list(traced[0][1].phases) if traced else []
    rows = []
    for name in names:
        cells = []
        for _c, t in traced:
            q = t.phases.get(name)
            cells.append("–" if q is None else f"{_f(q.p50, 2)} / {_f(q.p90, 2)} / {_f(q.p99, 2)}")
        rows.append([name, *cells])
    rows.append(["traced / untraced", *(f"{t.n_traced} / {t.n_untraced}" for _c, t in traced)])
    return head, rows


def phase_table(result: BenchResult) -> Table | None:
    """Where the TTFT went, per phase and concurrency; None when no run was traced."""
    if not _traced(result):
        return None
    head, rows = _phase_rows(result)
    table = Table(title="where the time to first token went (traced requests)")
    table.add_column(head[0])
    for name in head[1:]:
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def phase_markdown(result: BenchResult) -> str:
    """The phase table in markdown (empty when no run was traced)."""
    if not _traced(result):
        return ""
    head, rows = _phase_rows(result)
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    notes = [f"\n{line}" for line in return_lines(result)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows), *notes]) + "\n"


def return_lines(result: BenchResult) -> list[str]:
    """Per traced concurrency whose ``return`` median is a Nagle-held chunk: what it is."""
    out = []
    for c, t in _traced(result):
        q = t.phases.get("return")
        note = return_note(None if q is None else q.p50)
        if note is not None:
            out.append(f"{level_label(c)}: {note}")
    return out


def telemetry_lines(result: BenchResult) -> list[str]:
    """Per watched run, the run-telemetry rules that fired or could not judge (each citing its
    metric and delta), then how many stayed quiet; evidence only, not a verdict."""
    out = []
    for run in result.runs:
        if run.telemetry is None:
            continue
        evidence = run_evidence(run.telemetry, run.records)
        short = [e for e in evidence if _too_short(e)]  # a short run: not judged, not a warning
        told = evidence_lines([e for e in evidence if not _too_short(e)], quiet=False)
        quiet = sum(1 for e in evidence if e.state == QUIET)
        where = f"{level_label(run.concurrency)} run {run.repeat_index + 1}"
        out += [f"{where}: {line}" for line in told]
        counted = f"{where}: {quiet} of {len(evidence)} rule reading(s) quiet"
        if short:
            reasons = ", ".join(sorted({unknown_text(e) for e in short}))
            counted += f"; {len(short)} not judged ({reasons}: the run was too short to tell)"
        out.append(counted)
    return out


def _too_short(evidence: TelemetryEvidence) -> bool:
    """A rule that could not judge because the run gave it too few samples."""
    return evidence.state == UNKNOWN and evidence.why in TOO_SHORT


def phase_lines(result: BenchResult) -> list[str]:
    """One line per traced concurrency whose requests were not all traced."""
    return [
        f"{level_label(c)}: {t.n_untraced} of {t.n_requests} successful request(s) untraced "
        "(no server span arrived in time): left out of the phases, not counted as zero"
        for c, t in _traced(result)
        if t.n_untraced
    ]


def phase_plot(result: BenchResult) -> bytes | None:
    """One stacked bar per traced concurrency (each phase's median); None when none was."""
    traced = _traced(result)
    if not traced:
        return None
    bars = [(level_label(c), {n: q.p50 for n, q in t.phases.items()}) for c, t in traced]
    return ttft_phase_plot(bars, title=_title(result, ": where the TTFT went"))


def summary_markdown(result: BenchResult) -> str:
    """A markdown table, one column per concurrency."""
    if not result.levels:
        return "_no runs_\n"
    head = "| metric | " + " | ".join(level_label(lv.concurrency) for lv in result.levels) + " |"
    sep = "|---|" + "---:|" * len(result.levels)
    rows = [dict(_rows(level)) for level in result.levels]
    body = [f"| {name} | " + " | ".join(r[name] for r in rows) + " |" for name in rows[0]]
    phases = phase_markdown(result)
    return "\n".join([head, sep, *body]) + "\n" + (f"\n{phases}" if phases else "")


def summary_csv(result: BenchResult) -> str:
    """One CSV row per concurrency: throughput and the p50/p99 of each distribution."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    cols = [f"{name}_{stat}" for name in _DIST for stat in ("mean", "median", "p99")]
    tail = ["goodput", "slo_attainment", "slo_met", "cache_hit_rate"]
    writer.writerow(["concurrency", "runs", "requests", "ok", "tok_s_mean", "tok_s_std", *cols,
                     *tail])  # fmt: skip
    for lv in result.levels:
        stats = [getattr(getattr(lv, n), s) for n in _DIST for s in ("mean", "median", "p99")]
        t = lv.throughput
        slo = [None, None] if lv.slo is None else [lv.slo.attainment, lv.slo.met]
        writer.writerow([lv.concurrency, lv.n_runs, lv.n_requests, lv.n_ok, t.mean, t.std, *stats,
                         lv.goodput, *slo, lv.cache.hit_rate])  # fmt: skip
    return out.getvalue()


def sessions_csv(result: BenchResult) -> str:
    """One CSV row per conversation of a replayed trace and run: requests, failures, the hit
    rate over every turn and over the turns after the first (empty: unknown)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["repeat", "session", "requests", "failed", "prompt_tokens", "cached_tokens",
                     "hit_rate", "warm_hit_rate"])  # fmt: skip
    for run in result.runs:
        for s in run.sessions:
            writer.writerow([run.repeat_index, csv_text_cell(s.session), s.requests, s.failed,
                             s.cache.prompt_tokens, s.cache.cached_tokens, s.cache.hit_rate,
                             s.warm.hit_rate])  # fmt: skip
    return out.getvalue()


def load_plot(result: BenchResult) -> bytes | None:
    """Load over time next to TTFT, for the open-loop runs (a trace, a rate): what arrived and
    what it cost, on one time axis; None when every run was a closed loop."""
    runs = [r for r in result.runs if result.config.trace is not None or result.config.rate]
    if not runs:
        return None
    run = runs[-1]
    slo = result.config.slo
    limits = [] if slo is None else [o for o in slo.objectives if o.metric == "ttft"]
    where = f"{level_label(run.concurrency)} run {run.repeat_index + 1}"
    return load_ttft_plot(run.records, title=_title(result, f" ({where}): load and TTFT"),
                          ttft_limit_ms=limits[0].limit_ms if limits else None)  # fmt: skip


def records_jsonl_chunks(result: BenchResult) -> Iterator[bytes]:
    """Every per-request record, one JSON object per line, tagged with its run, as it goes."""
    for run in result.runs:
        for record in run.records:
            row = {"concurrency": run.concurrency, "repeat": run.repeat_index}
            yield (json.dumps(row | encode(record)) + "\n").encode()


#: Every file :func:`export_files` may write (those of traced runs, a replayed trace's sessions and
#: an open loop included): ``bench --export`` replaces none that holds anything without ``--force``.
EXPORT_NAMES = (
    "summary.md",
    "summary.csv",
    "records.jsonl",
    "result.json",
    "ttft_phases.png",
    "sessions.csv",
    "load_ttft.png",
)


def export_files(result: BenchResult) -> dict[str, bytes | Iterable[bytes]]:
    """The ``bench --export`` files: ``summary.md``, ``summary.csv``, ``records.jsonl``,
    ``result.json``, ``ttft_phases.png`` when runs were traced, ``sessions.csv`` for a replayed
    trace's conversations and ``load_ttft.png`` for an open loop (name -> bytes, or chunks
    streamed as written: ``records.jsonl``; the CLI's one writer saves them, every write
    checked)."""
    doc = result_json(result)
    files: dict[str, bytes | Iterable[bytes]] = {
        "summary.md": safe_markdown(summary_markdown(result)).encode(),
        "summary.csv": summary_csv(result).encode(),
        "records.jsonl": records_jsonl_chunks(result),
        "result.json": doc.encode(),
    }
    plot = phase_plot(result)
    if plot is not None:
        files["ttft_phases.png"] = plot
    if any(run.sessions for run in result.runs):
        files["sessions.csv"] = sessions_csv(result).encode()
    load = load_plot(result)
    if load is not None:
        files["load_ttft.png"] = load
    return files
