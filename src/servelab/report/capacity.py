"""``bench --find-capacity`` for people: the probes as a table, the conclusion in words, the JSON
document and the markdown (pure: returns values, the CLI writes them).
"""

from __future__ import annotations

import math

from rich.table import Table

from servelab.core.ledger.codec import encode
from servelab.core.load.capacity import Capacity, CapacityStop, LoadKind, Probe
from servelab.core.load.metrics import CUT_REASONS
from servelab.core.stats import PERCENTILE_METHOD
from servelab.ops.bench.capacity import CapacityResult
from servelab.report.jsontext import json_text
from servelab.report.slo import attainment_text, objective_text, verdict_word

__all__ = [
    "capacity_json",
    "capacity_markdown",
    "capacity_table",
    "conclusion",
    "conclusion_of",
    "deadline_refusal",
    "first_error",
    "interrupted_line",
    "load_text",
    "served_text",
    "unsaved_line",
    "warmup_line",
]


def _rate(value: float) -> str:
    """``12.5``, ``150``, ``1,024`` (three figures; from 1,000 whole, with separators)."""
    return f"{value:,.0f}" if math.isfinite(value) and abs(value) >= 1000 else f"{value:.3g}"


def load_text(kind: LoadKind, load: float | None) -> str:
    """``C56`` or ``12.5 req/s`` (``1,024 req/s``; ``–`` for None)."""
    if load is None:
        return "–"
    return f"C{load:g}" if kind == LoadKind.CONCURRENCY else f"{_rate(load)} req/s"


def served_text(probe: Probe, in_flight: int | None = None) -> str:
    """``not sustained: served 72.1 of 150 req/s`` (the pace of its answered requests: failed
    and cut ones are not served) and, when its in-flight limit was taken
    whole, ``, all 8 in flight (--concurrency)`` (empty: sustained)."""
    if probe.sustained or probe.served is None:
        return ""
    served = _rate(probe.served)
    capped = ""
    if probe.capped:
        capped = f", all {in_flight if in_flight is not None else '?'} in flight (--concurrency)"
    return f"not sustained: served {served} of {_rate(probe.load)} req/s{capped}"


def warmup_line(requests: int) -> str:
    """What the search sends before its first probe, and why."""
    return (f"{requests} request(s) before the first probe, not measured: a deployment's first "
            "requests pay its one-time warm-up (--warmup N: N before every probe; --warmup 0: "
            "none)")  # fmt: skip


def deadline_refusal(deadline_s: float, probe_s: float, typed: bool) -> str:
    """Why a rate search's ``--deadline`` no longer than its probes' span is refused."""
    default = "" if typed else " (the default)"
    return (f"--deadline {deadline_s:g} would cut every rate probe short: a probe sustains its "
            f"rate for --probe-s {probe_s:g}{default} seconds of arrivals, and its last "
            "requests need time to be answered, so a probe cut by then measures no sustained "
            "rate; give a --deadline longer than --probe-s (it cuts each probe, not the whole "
            "search), or a shorter --probe-s (at least 1)")  # fmt: skip


def unsaved_line(why: str) -> str:
    """What ``--export`` did not write after a search (``why``: the writer's words)."""
    return f"{why}; the search's result is printed above, not saved"


def _probe_rows(result: CapacityResult) -> list[list[str]]:
    kind = result.capacity.kind
    rows, seen = [], set()
    for probe, run in zip(result.capacity.probes, result.runs, strict=False):
        att = run.slo
        objectives = "; ".join(objective_text(o) for o in att.objectives) if att else "–"
        again = " again" if probe.load in seen else ""
        seen.add(probe.load)
        served = served_text(probe, _in_flight(result))
        verdict = (served or verdict_word(probe.met, probe.sure)) + _failed_note(probe)
        verdict += f", {_share(probe.cut)} cut" if probe.cut > 0 else ""
        rows.append([load_text(kind, probe.load) + again, verdict,
                     f"{probe.throughput:,.1f}", objectives,
                     "–" if probe.run_id is None else f"#{probe.run_id}"])  # fmt: skip
    return rows


def _in_flight(result: CapacityResult) -> int | None:
    """A rate probe's in-flight limit (None: a concurrency search)."""
    rate = result.capacity.kind == LoadKind.RATE
    return max(result.config.concurrencies) if rate and result.config.concurrencies else None


def _share(failed: float) -> str:
    """``25%`` (a share above 0 and under 1%: ``<1%``)."""
    return "<1%" if failed < 0.01 else f"{failed:.0%}"


def _failed_note(probe: Probe) -> str:
    """``, 25% failed`` when any request of a probe failed; a rate probe's served rate (its
    ``served``) counts its answered requests only, so a sustained one says it: ``, 25% failed
    (the answered served at 150 of 150 req/s)``."""
    if probe.failed <= 0:
        return ""
    said = f", {_share(probe.failed)} failed"
    if probe.served is None or not probe.sustained:
        return said
    return f"{said} (the answered served at {_rate(probe.served)} of {_rate(probe.load)} req/s)"


_HEAD = ["load", "SLO", "tok/s", "objectives", "run"]


def capacity_table(result: CapacityResult) -> Table:
    """One row per probe, in the order run."""
    slo = result.config.slo
    table = Table(title=f"capacity under {slo.text if slo else '?'}",
                  caption=f"percentiles: {PERCENTILE_METHOD}")  # fmt: skip
    for name in _HEAD:
        table.add_column(name, justify="left" if name == "objectives" else "right")
    for row in _probe_rows(result):
        table.add_row(*row)
    return table


def first_error(result: CapacityResult) -> str | None:
    """The last probe's first failed request, as its reason and detail (as its record keeps it:
    redacted, cut), on one line of printable characters (None: none failed)."""
    records = result.runs[-1].records if result.runs else []
    bad = next((r for r in records if r.error is not None and r.error not in CUT_REASONS), None)
    if bad is None:
        return None
    text = f"{bad.error}: {bad.error_detail}" if bad.error_detail else str(bad.error)
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _failed_text(capacity: Capacity, error: str | None) -> str:
    last = capacity.probes[-1] if capacity.probes else None
    if last is None:
        return "no capacity verdict: the requests failed"
    share = "every request" if last.failed >= 1 else f"{last.failed:.0%} of the requests"
    first = "" if error is None else f" (first error: {error})"
    return (f"no capacity verdict: {share} at {load_text(capacity.kind, last.load)} failed"
            f"{first}; a deployment that does not answer has no latency to judge: check it "
            "(servelab verify) and search again")  # fmt: skip


def _failures_text(capacity: Capacity) -> str:
    """Where some requests failed though not enough to stop the search (empty: none did)."""
    failed = [p for p in capacity.probes if p.failed > 0]
    if not failed or capacity.stop == CapacityStop.FAILED:
        return ""
    said = [f"{_share(p.failed)} at {load_text(capacity.kind, p.load)}" for p in failed]
    said[0] = said[0].replace(" at ", " of the requests failed at ", 1)
    return (
        f"; {', '.join(said)} (a failed request counts outside every limit: check the "
        "deployment, servelab verify)"
    )


def _limited_text(capacity: Capacity, lo: str, sure: str, span_s: float | None) -> str:
    if capacity.kind == LoadKind.RATE:
        top = load_text(capacity.kind, capacity.limit)
        span = "?" if span_s is None else f"{span_s:g}"
        return (f"cannot tell above {top}: the SLO held at {lo}, and a probe sustains its rate "
                f"for {span} s of arrivals with at most the requests allowed a probe; raise "
                f"--requests to search higher ({sure})")  # fmt: skip
    requests = "?" if capacity.limit is None else f"{capacity.limit:g}"
    return (f"capacity at least {lo}: the SLO held there, and the search was limited by "
            f"--requests {requests} (a closed loop never has more requests in flight "
            f"than it sends); more --requests would search higher ({sure})")  # fmt: skip


def conclusion(
    capacity: Capacity,
    error: str | None = None,
    span_s: float | None = None,
    in_flight: int | None = None,
) -> str:
    """What the search found and how sure it is, in one sentence; ``error``: the first failed
    request's, said when the requests failed; ``span_s``: a rate probe's seconds of arrivals;
    the lowest rate not sustained said after it (``in_flight``: a rate probe's limit, said when
    it was reached), then the probes where some requests failed."""
    return (
        _verdict(capacity, error, span_s)
        + _unserved_text(capacity, in_flight)
        + _failures_text(capacity)
        + _cut_text(capacity)
    )


def _cut_text(capacity: Capacity) -> str:
    """Where the run's end (``--deadline``) cut requests before they were answered (empty: it
    cut none): those probes are judged as far as their requests went."""
    cut = [p for p in capacity.probes if p.cut > 0]
    if not cut or capacity.stop == CapacityStop.FAILED:
        return ""
    most = max(cut, key=lambda p: p.cut)
    at = f"{_share(most.cut)} of the requests at {load_text(capacity.kind, most.load)}"
    longer = ("--probe-s plus the time a request takes" if capacity.kind == LoadKind.RATE
              else "the time a probe's requests take")  # fmt: skip
    return (
        f"; the --deadline cut requests before they were answered in {len(cut)} of "
        f"{len(capacity.probes)} probes (the most: {at}): a probe cut short is judged as far "
        f"as its requests went (what was not known yet counts outside its SLO; the rate it "
        f"served counts what it answered); give a --deadline longer than "
        f"{longer}"
    )


def _unserved_text(capacity: Capacity, in_flight: int | None) -> str:
    """The lowest rate whose probe was not sustained, what it served, and whether the in-flight
    limit bound it (empty: every rate probed was sustained)."""
    short = [p for p in capacity.probes if not p.sustained and p.served is not None]
    if not short or capacity.stop == CapacityStop.FAILED:
        return ""
    low = min(short, key=lambda p: p.load)
    why = ("the --deadline cut its last requests, not a sign of a queue" if low.cut > 0
           else "a queue grew: more offered load only waits")  # fmt: skip
    said = f"; {served_text(low, in_flight)} ({why})"
    if not low.capped:
        return said
    limit = "?" if in_flight is None else str(in_flight)
    return (f"{said}; the in-flight limit bound it: the deployment was asked for at most "
            f"{limit} at once (--concurrency {limit}); raise it to tell whether it serves "
            "more")  # fmt: skip


def _verdict(capacity: Capacity, error: str | None, span_s: float | None) -> str:
    kind = capacity.kind
    lo, hi = load_text(kind, capacity.capacity), load_text(kind, capacity.above)
    if capacity.offered is not None:
        lo = f"{lo} (served, of {load_text(kind, capacity.offered)} offered)"
    sure = ("both verdicts sure at 95%" if capacity.sure
            else "not sure: an end's 95% interval straddles its percentile; more --requests "
            "would settle it")  # fmt: skip
    estimate = (
        ""
        if capacity.estimate is None
        else (
            f"; the binding objective crosses its limit near {load_text(kind, capacity.estimate)}"
        )
    )
    match capacity.stop:
        case CapacityStop.BRACKETED:
            return f"capacity {lo}: the SLO holds there and not at {hi}{estimate} ({sure})"
        case CapacityStop.SATURATED:
            held = "" if span_s is None else f", each rate sustained for {span_s:g} s"
            return (f"saturated at {lo}: doubling the load raised the throughput by less than "
                    f"5% while the SLO held{held}, so more load only queues; the SLO did not "
                    f"bind ({sure})")  # fmt: skip
        case CapacityStop.CEILING:
            return f"capacity at least {lo}: the SLO held up to the highest load allowed ({sure})"
        case CapacityStop.NEVER_MET:
            low = load_text(kind, min((p.load for p in capacity.probes), default=None))
            return f"the SLO was missed at every load tried, down to {low}"
        case CapacityStop.BUDGET:
            return (f"out of probes: the SLO holds at {lo}" + (f", not at {hi}" if hi != "–"
                    else "") + f"{estimate} ({sure})")  # fmt: skip
        case CapacityStop.INTERRUPTED:
            return _interrupted_text(capacity, lo)
        case CapacityStop.FAILED:
            return _failed_text(capacity, error)
        case CapacityStop.LIMITED:
            return _limited_text(capacity, lo, sure, span_s)


def _interrupted_text(capacity: Capacity, lo: str) -> str:
    if not capacity.probes:
        return "interrupted before any probe completed: no load was judged, no capacity found"
    if capacity.capacity is None:
        low = load_text(capacity.kind, min(p.load for p in capacity.probes))
        return f"interrupted: the SLO held at no load so far (missed down to {low})"
    return f"interrupted: the SLO held at {lo} so far"


def interrupted_line(result: CapacityResult, signal_words: str) -> str:
    """What stderr says of an interrupted search (``signal_words``: ``interrupted``, or by what
    signal)."""
    if not result.capacity.probes:
        return f"{signal_words} before any probe completed: nothing measured to show"
    return f"{signal_words}: the probes so far shown"


def conclusion_of(result: CapacityResult, error: str | None) -> str:
    """:func:`conclusion` of a search, its rate probes' in-flight limit said."""
    return conclusion(result.capacity, error, result.span_s, _in_flight(result))


def capacity_json(result: CapacityResult) -> str:
    """The search as one JSON document: config, the conclusion's codes and numbers, each probe
    with its run's SLO attainment."""
    probes = []
    for probe, run in zip(result.capacity.probes, result.runs, strict=False):
        ratio = None if math.isnan(probe.ratio) else probe.ratio
        probes.append({**encode(probe), "ratio": ratio,
                       "slo": None if run.slo is None else encode(run.slo)})  # fmt: skip
    doc = encode(result.capacity)
    doc["probes"] = probes
    error = first_error(result) if result.capacity.stop == CapacityStop.FAILED else None
    head = {"config": encode(result.config), "failed": result.n_failed}
    words = {"first_error": error, "span_s": result.span_s,
             "conclusion": conclusion_of(result, error)}  # fmt: skip
    return json_text({**head, **doc, **words})


def capacity_markdown(result: CapacityResult) -> str:
    """The probes' table and the conclusion in markdown."""
    lines = ["| " + " | ".join(_HEAD) + " |", "|---:|---:|---:|---|---:|"]
    lines += ["| " + " | ".join(row) + " |" for row in _probe_rows(result)]
    # one run a probe, in order; a run cut by a stop (after the last probe) is no probe's
    done = len(result.capacity.probes)
    last = result.runs[done - 1].slo if 0 < done <= len(result.runs) else None
    tail = [] if last is None else ["", f"Last probe: {attainment_text(last)}."]
    words = conclusion_of(result, first_error(result))
    return "\n".join([*lines, "", words + ".", *tail]) + "\n"
