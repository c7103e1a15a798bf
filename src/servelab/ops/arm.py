"""An arm of an experiment: knob values made live, then measured through the router.

What ``ab``, ``tune`` and ``case bisect`` share (each visit of an arm is one call of each):

- :func:`make_live`: set every knob of the arm in its file (``set_knob``: a backup, the change
  recorded), co-restart the services whose knobs they are and their dependents in start order
  (``restart``, the one restart rule, which restarts every service reading a changed file
  with it: two decode replicas sharing one env file), then prove the arm live: the config,
  live, pair and e2e
  layers of ``verify`` (e2e also pays the cold first request, which would otherwise land in the
  measurement) and each value read back from the process (``/proc/PID/environ``, or
  ``/proc/PID/cmdline`` for an argument knob), and from each service that reads the file it was
  written to too, whatever its kind (an ``env_file``, a ``config_file`` two decodes read with
  ``--config``, an ``args_env`` variable they both expand:
  :func:`~servelab.ops.sharedfile.file_readers`). An arm that is not live is not measured: a
  :class:`~servelab.errors.BenchError` says which layer or value disagreed. A bisection's arms
  skip the e2e layer: an arm may be the broken state itself, and its test exercises the path.
  A pair the pair layer fails (its engines disagree on what the KV hand-off needs, or a field is
  not reported by both) is the arm's finding, as a failed long prompt is: said on its progress
  line and in :attr:`LiveArm.pair_failed`, the arm measured, but never kept (``ab --keep``,
  ``tune --keep-best``).
  A process whose argv and environment are unreadable in ``/proc`` (sglang-router 0.3.2 writes
  ``sglang::router`` over them) proves an argument by its own report
  (:func:`~servelab.ops.arguments.engine_arguments`: a router's policy from its metrics).
- :func:`measure`: one bench run per concurrency through the router, each timed, valued by the
  metric (:class:`~servelab.core.ab.result.AbMetric`): the steady state's throughput (every
  slot busy) when the run had one, with the decodes' own count of the tokens they generated as
  its cross-check, or the goodput under the SLO; or, on capacity, one capacity search (its
  estimate, under :data:`~servelab.core.ab.result.CAPACITY_LEVEL`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from servelab.core.ab.result import CAPACITY_LEVEL, AbMetric
from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswerReferences
from servelab.core.bench.contract import (
    PLACEHOLDER_MODEL,
    BenchConfig,
    BenchProgressFn,
    LevelSummary,
    RunResult,
)
from servelab.core.knob import OFF, KnobKind, same_value
from servelab.core.knobs.events import KnobVerifiedLive
from servelab.core.knobs.serverinfo import Reported
from servelab.core.load.capacity import PROBE_SPAN_S
from servelab.core.load.records import RequestRecord
from servelab.core.redaction import mask
from servelab.core.telemetry.summary import generated_tokens_per_s
from servelab.core.verify.arguments import ArgumentLive
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.errors import BenchError
from servelab.io.http.client import HttpClient
from servelab.ops.arguments import argument_knob, engine_arguments
from servelab.ops.bench.bench import run_bench
from servelab.ops.bench.capacity import find_capacity
from servelab.ops.context import Operation
from servelab.ops.deploy.deploy import restart
from servelab.ops.knob import get_knob, live_knob, set_knob
from servelab.ops.sharedfile import file_readers, launched_env_value
from servelab.ops.telemetry.tracing import trace_collector
from servelab.ops.telemetry.watch import MetricsPlan, metrics_plan
from servelab.ops.verify.e2e import E2EOptions
from servelab.ops.verify.verify import verify

__all__ = [
    "LiveArm",
    "Measured",
    "Setting",
    "arm_label",
    "make_live",
    "measure",
    "router_url",
    "served_model",
]


@dataclass(frozen=True)
class Setting:
    """One knob of an arm: ``service``'s ``knob`` at ``value`` (None: unset)."""

    service: str
    knob: str
    value: str | None


def arm_label(settings: Sequence[Setting]) -> str:
    """``SERVICE:KNOB=VALUE`` of each setting, comma-separated (how an error names the arm: the
    ``SERVICE:NAME`` form ``--change``/``--knob`` take)."""
    return ", ".join(f"{s.service}:{s.knob}={s.value}" for s in settings)


@dataclass(frozen=True)
class LiveArm:
    """The proof an arm is live: its verification, and each setting's value read back."""

    verification_id: int | None
    live: tuple[str | None, ...]
    #: the pair layer's failed checks (``pair SERVICE: CODE``; empty: every pair agrees): the
    #: arm's finding, measured but never kept (a pair mismatch gives wrong answers or failed
    #: requests with no error)
    pair_failed: tuple[str, ...] = ()


async def make_live(
    op: Operation,
    settings: Sequence[Setting],
    reason: str,
    *,
    e2e: bool = True,
    answers_tested: bool = False,
    e2e_options: E2EOptions | None = None,
) -> LiveArm:
    """Set each knob, co-restart, and prove the arm live (end to end unless not ``e2e``: an arm
    that may be broken, a bisection's, is proven by its values and its path left to its test);
    raise when it is not. With ``answers_tested`` (a test that measures the arm's answers), an
    e2e check failed by ``e2e.answers_changed`` alone does not make the arm not live: its
    answers differ, which is what the test measures. ``e2e_options``: the e2e layer's (None:
    verify's defaults)."""
    shared: list[Setting] = []  # the same knob as another service reading its file has it
    readers: list[str] = []
    for s in settings:
        change = await set_knob(op, s.service, s.knob, s.value, reason=reason)
        # every other reader of the file it was written to, whatever its kind (restarted and
        # verified with it), read back at the value its own files give it (one whose args_env
        # sets the knob too runs with that one) when it declares the knob
        for other in await file_readers(op, s.service, change.env_file, change.place):
            readers.append(other)
            if s.knob in op.spec.service(other).knobs:
                shared.append(Setting(other, s.knob, await get_knob(op, other, s.knob)))
    known = {(s.service, s.knob) for s in settings}
    shared = [s for s in dict.fromkeys(shared) if (s.service, s.knob) not in known]
    services = list(dict.fromkeys([*(s.service for s in [*settings, *shared]), *readers]))
    report = await restart(op, services, verify_after=False)
    if not report.ok:
        failed = [s.service for s in report.steps if not s.ok]
        values = ", ".join(str(s.value) for s in settings)
        raise BenchError(f"restart for arm {values} failed ({', '.join(failed)}): arm not measured")
    layers = ("config", "live", "pair", "e2e") if e2e else ("config", "live", "pair")
    proof = await verify(op.quiet(), services, layers=layers, e2e=e2e_options)
    reads = [await _read_back(op, s) for s in settings]
    live = tuple(r.value for r in reads)
    live_shared = [await _read_back(op, s) for s in shared]
    wrong = [_value_wrong(s.service, s.knob, r)
             for s, r in zip([*settings, *shared], [*reads, *live_shared], strict=True)
             if not r.known or not same_value(r.value, _expected(op, s))]  # fmt: skip
    read_back = {(s.service, argument_knob(op, s.knob).name) for s in settings}
    # a long prompt that fails is a finding of the arm, not a sign it is not live: its short
    # prompts went through (the guilty arm of a case test fails long prompts; its test says so)
    long_failed = any(c.code is CheckCode.E2E_LONG_FAILED for c in proof.failures)
    # a pair that disagrees is the arm's finding too (its engines came up with these values):
    # said, measured, never kept; the other layers say whether the arm is live
    pair_failed = tuple(f"pair {c.service}: {c.code}" for c in proof.failures
                        if c.layer is Layer.PAIR)  # fmt: skip
    findings = {CheckCode.E2E_LONG_FAILED} | ({CheckCode.E2E_ANSWERS_CHANGED}
                                             if answers_tested else set())  # fmt: skip
    failures = [c for c in proof.failures if not _hidden_by_process(c, read_back)
                and c.code not in findings and c.layer is not Layer.PAIR]  # fmt: skip
    if failures or wrong:
        failed = [f"{c.layer} {c.service}: {c.code}" for c in failures]
        reasons = "; ".join(failed) or "; ".join(wrong)
        raise BenchError(f"arm {arm_label(settings)} is not live ({reasons}): arm not measured")
    for s in [*settings, *shared]:
        op.say(KnobVerifiedLive(s.service, s.knob, s.value, proof.verification_id, long_failed,
                                pair_failed))  # fmt: skip
    return LiveArm(proof.verification_id, live, pair_failed)


async def _read_back(op: Operation, setting: Setting) -> Reported:
    """The setting's live value: from the process (``/proc``), else, for an argument the process
    does not show (sglang-router's argv), from what the service reports it runs with; for an env
    knob of a router that wrote over its environment, from the copy of the env file servelab
    kept when the arm's restart launched it (:func:`~servelab.ops.sharedfile.launched_env_value`:
    what it was started with), not read back without one."""
    live = await live_knob(op, setting.service, setting.knob)
    knob = argument_knob(op, setting.knob)
    if knob.is_env:
        if live is None and op.spec.service(setting.service).role == "router":
            return await launched_env_value(op, setting.service, knob.name)
        return Reported(True, live)
    if same_value(live, _expected(op, setting)):
        return Reported(True, live)
    reported = (await engine_arguments(op, setting.service, [knob]))[knob.name]
    return Reported(True, reported.value if reported.known else live)


def _value_wrong(service: str, knob: str, read: Reported) -> str:
    """Why one of an arm's settings is not proved live (the error's words; ops may not import
    report/): its value not read back (a router that writes over its environment, started with
    no copy of its env file kept), or another value (a secret-looking knob's masked)."""
    if not read.known:
        return (f"{service}: {knob} not read back (the router writes over its environment, and "
                "servelab kept no copy of the env file it was launched with)")  # fmt: skip
    value = "unset" if read.value is None else repr(mask(knob, read.value))
    where = " (in the env file it was launched with)" if read.where else ""
    return f"{service}: live value {value}{where}"


def _hidden_by_process(check: Check, read_back: set[tuple[str, str]]) -> bool:
    """A live check of an argument the process does not show (its argv has none of it: the
    router's, written over) whose value was read back from the service's own report instead
    (:func:`_read_back`, checked against the arm by the caller): not a failure of the arm."""
    data = check.data
    return (
        isinstance(data, ArgumentLive)
        and data.live is None
        and (check.service, data.knob) in read_back
    )


def _expected(op: Operation, setting: Setting) -> str | None:
    """The value the process shows for ``setting``: a flag's as ``on``/``off`` (unset: off)."""
    knob = argument_knob(op, setting.knob)
    if knob.kind is KnobKind.FLAG and setting.value is None:
        return OFF
    return knob.normalize(setting.value)


def router_url(op: Operation) -> str:
    """Where an arm's load goes: the router (else the entry point), never a proxy before it."""
    name = op.spec.router_name or op.spec.entry_point
    return op.spec.services[name].url


async def served_model(url: str, model: str) -> str:
    """The model an arm's requests name: ``model`` when a command gave one, else (the
    placeholder :data:`~servelab.core.bench.contract.PLACEHOLDER_MODEL`) the first the router lists
    in ``/v1/models``, as ``verify`` asks it: smg routes by model and answers 503
    ``no_available_workers`` to a model no worker serves."""
    if model != PLACEHOLDER_MODEL:
        return model
    async with HttpClient(limit=1) as http:
        listed = await http.model_id(url, 10.0)
    if listed is None:
        raise BenchError(f"{url}/v1/models lists no model: the load needs one the router serves")
    return listed


@dataclass(frozen=True)
class Measured:
    """A visit's measurement, per concurrency: throughput (tok/s), each run's seconds, the
    decodes' own tok/s (absent: unknown); the failed requests and the bench runs recorded."""

    throughput: Mapping[int, float]
    bench_s: Mapping[int, float]
    server_throughput: Mapping[int, float]
    failed_requests: int
    bench_run_ids: tuple[int, ...]
    #: the answer probes' answers (empty: answers not checked); the load requests sent beside
    #: them (a request a deadline or a stop cut before it was sent is not)
    answers: tuple[Answer, ...] = ()
    requests: int = 0
    #: every run's request records (the client's own view of its load)
    records: tuple[RequestRecord, ...] = ()


async def measure(
    op: Operation,
    bench: BenchConfig,
    levels: Sequence[int],
    label: str,
    bench_progress: BenchProgressFn | None,
    *,
    metric: AbMetric = AbMetric.THROUGHPUT,
    visit: int = 0,
    round_: int = 0,
    references: AnswerReferences | None = None,
    span_s: float = PROBE_SPAN_S,
) -> Measured:
    """One run of ``bench`` (its URL the router's, once) per concurrency in ``levels``, valued by
    ``metric``; on capacity, one capacity search within the levels instead. A replayed trace's
    words come from the seed plus ``visit`` (the visit's place in its plan), so no visit finds
    the one before's prompts in the engines' prefix caches (the trace's own sharing stays).
    With the template's answer probes, each run carries those of round ``round_`` (both arms
    of a round send the same: paired), checked later against ``references``; ``span_s``: a rate
    capacity search's probe span."""
    plan = await metrics_plan(op)
    url = router_url(op)
    model = await served_model(url, bench.model)
    template = replace(bench, url=url, repeat=1, label=label, model=model, probe_round=round_)
    if template.trace is not None:
        template = replace(template, seed=template.seed + visit)
    if metric == AbMetric.CAPACITY:
        return await _capacity(op, template, plan, bench_progress, span_s)
    decodes = op.spec.by_role("decode")
    values: dict[int, float] = {}
    bench_s: dict[int, float] = {}
    served: dict[int, float] = {}
    run_ids: list[int] = []
    answers: list[Answer] = []
    records: list[RequestRecord] = []
    failed = requests = 0
    for conc in levels:
        config = replace(template, concurrencies=(conc,))
        t0 = time.monotonic()
        result = await run_bench(config, progress=bench_progress, ledger=op.ledger, metrics=plan,
                                 traces=trace_collector(op.spec),
                                 references=references, own_references=False)  # fmt: skip
        bench_s[conc] = time.monotonic() - t0
        run_ids += [r.run_id for r in result.runs if r.run_id is not None]
        answers += [a for r in result.runs for a in r.answers]
        records += [rec for r in result.runs for rec in r.records]
        requests += _sent(result.runs)
        failed += result.n_failed
        for lvl in result.levels:
            values[lvl.concurrency] = _value(metric, lvl)
        counted = [generated_tokens_per_s(r.telemetry, decodes) for r in result.runs if r.telemetry]
        if metric == AbMetric.THROUGHPUT and counted and counted[-1] is not None:
            served[conc] = counted[-1]  # the servers' own tok/s: a cross-check of throughput
    return Measured(values, bench_s, served, failed, tuple(run_ids), tuple(answers), requests,
                    tuple(records))  # fmt: skip


def _sent(runs: Sequence[RunResult]) -> int:
    """The load requests the runs sent (a run cut by its deadline or a stop sent fewer than it
    planned: the others' records were never sent)."""
    return sum(1 for run in runs for record in run.records if record.sent_ns)


def _value(metric: AbMetric, level: LevelSummary) -> float:
    """A level's value of ``metric``: the steady state's output tok/s when the run had one
    (every slot busy; else the whole run's), or the goodput."""
    if metric == AbMetric.GOODPUT:
        return level.goodput or 0.0
    steady = level.steady_throughput
    return steady.mean if steady.n else level.throughput.mean


async def _capacity(
    op: Operation,
    template: BenchConfig,
    plan: MetricsPlan | None,
    bench_progress: BenchProgressFn | None,
    span_s: float = PROBE_SPAN_S,
) -> Measured:
    """One capacity search (a rate's probes ``span_s`` seconds each): its estimate where the
    binding objective crosses its limit, else the largest load that held (a search that never
    met the SLO stops the experiment)."""
    t0 = time.monotonic()
    found = await find_capacity(template, progress=bench_progress, ledger=op.ledger, metrics=plan,
                                span_s=span_s)  # fmt: skip
    cap = found.capacity
    value = cap.estimate if cap.estimate is not None else cap.capacity
    if value is None:
        raise BenchError(f"arm {template.label}: the SLO was not met at any load tried "
                         f"({cap.stop}): no capacity to compare")  # fmt: skip
    run_ids = tuple(r.run_id for r in found.runs if r.run_id is not None)
    bench_s = {CAPACITY_LEVEL: time.monotonic() - t0}
    return Measured({CAPACITY_LEVEL: value}, bench_s, {}, found.n_failed, run_ids,
                    requests=_sent(found.runs))  # fmt: skip
