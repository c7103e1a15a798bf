"""Text renderings of verifications: each check's reason, one table per layer and a summary (no I/O,
returns str).

A check carries an outcome code and its data, a type per kind (:mod:`servelab.core.verify.checks`);
:func:`check_detail` words it by matching on that type, for a live check and a ledger row alike (an
older ledger's row that stored its sentence instead of a code reads that sentence).
:func:`with_details` gives a check's JSON with that sentence as ``detail``: what ``verify --json``,
``restart --json`` and ``ledger export`` print.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from rich.table import Table
from rich.text import Text

from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import UnreadKnob
from servelab.core.ledger.codec import JsonObject, encode
from servelab.core.redaction import REDACTED, mask
from servelab.core.verify.answers import AnswerProbes
from servelab.core.verify.arguments import (
    ArgumentDropped,
    ArgumentInFile,
    ArgumentLive,
    UnitState,
)
from servelab.core.verify.checks import (
    Check,
    CheckCode,
    CheckData,
    CheckFailure,
    E2EProbe,
    EnvFileFailure,
    EnvFileNoKnobs,
    HealthProbe,
    KnobInFile,
    KnobLive,
    KnobLiveVsSpec,
    Layer,
    LayerSkipped,
    LiveProcess,
    NoEnvFile,
    RequestTiming,
    SkipReason,
    WorkerListing,
    WorkerReach,
)
from servelab.core.verify.coldstart import StartReason
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.masked import (
    CheckResult,
    masked_argument_live,
    masked_in_file,
    masked_knob_live,
    result_of,
)
from servelab.core.verify.pair import PairReport
from servelab.core.verify.record import CheckRecord, StoredCheck, UntypedCheck, read_check
from servelab.core.verify.served import Gap, Signal
from servelab.report.knob import describe_unread, describe_verdict
from servelab.report.pair import describe_pair
from servelab.report.probes import describe_probes
from servelab.report.route import route_text
from servelab.report.text import json_text, plain_text, show_value

__all__ = [
    "WORKER_NOTE",
    "check_detail",
    "render_verify",
    "verify_json",
    "with_details",
]

#: What a PD worker's passing health check does not prove.
WORKER_NOTE = "a PD worker's own health check never exercises the KV transfer (see e2e)"

_TITLES = {
    Layer.CONFIG: "config: env file vs spec and backup",
    Layer.LIVE: "live: /proc/PID/environ vs env file",
    Layer.PAIR: "pair: what each prefill/decode pair's engines report, against each other",
    Layer.HEALTH: "health: readiness endpoints",
    Layer.E2E: "e2e: streaming chat completion through the entry point (xPyD: every worker)",
}
_C = CheckCode


# -- one check's reason -------------------------------------------------------------------------


def check_detail(check: CheckRecord) -> str:
    """The check's reason in one line, from its code and data (an older ledger row: the sentence
    it stored; a code this servelab does not know: the code itself)."""
    match check:
        case Check(code=code, data=data):
            return _reason(code, data)
        case UntypedCheck(detail=detail, code=code):
            return detail or code or ""
        case _:
            assert_never(check)


def _reason(code: CheckCode, data: CheckData) -> str:
    match data:
        case CheckFailure(error=error):
            return error
        case NoEnvFile(knobs=knobs):
            more = "; declared knobs are compared live against the spec only" if knobs else ""
            return "no env_file in the spec" + more
        case EnvFileFailure(env_file=env_file) if code is _C.CONFIG_MISSING:
            return f"env file {env_file} does not exist"
        case EnvFileFailure(error=error):
            return error or "unreadable"
        case EnvFileNoKnobs():
            return "env file parses; no declared knobs"
        case KnobInFile():
            return _knob_in_file(code, data)
        case LiveProcess():
            return _process(code, data)
        case KnobLive():
            return _knob_live(data)
        case KnobLiveVsSpec(knob=knob, live=real_live, spec=real_spec):
            live, spec = mask(knob, real_live), mask(knob, real_spec)
            pinned = f", spec pins {spec}" if spec is not None else ""
            return f"live {show_value(live)}{pinned}; no env file to compare"
        case HealthProbe():
            return _health(code, data)
        case E2EProbe():
            return _e2e(code, data)
        case WorkerReach():
            return _reach(code, data)
        case ArgumentInFile():
            return _argument_in_file(code, data)
        case UnitState():
            return _unit(code, data)
        case ArgumentLive():
            return _argument_live(code, data)
        case PairReport():
            return describe_pair(data)
        case AnswerProbes():
            return describe_probes(code, data)
        case UnreadKnob():
            return describe_unread(data)
        case ArgumentDropped(path=path, key=key, knob=knob):
            return (
                f"the config file {path} writes `{key}`, which the engine drops (vLLM keeps no "
                f"false in --config): {knob} runs at the engine's default; write `no-"
                f"{key.split(':')[0]}: true` to turn it off"
            )
        case LayerSkipped(reason=reason):
            return _skipped(reason)
        case _:
            assert_never(data)


def _skipped(reason: SkipReason) -> str:
    match reason:
        case SkipReason.NO_ENTRY_POINT:
            return ("skipped: the deployment has no router or proxy to send a request through "
                    "(the workers' own health is the health layer's)")  # fmt: skip
        case _:
            assert_never(reason)


#: Where an argument's file value comes from, in a sentence.
_PLACES = {
    "args_env": "the args_env variable",
    "config_file": "the config file",
    "spec": "the spec's command line",
}


def _argument_in_file(code: CheckCode, real: ArgumentInFile) -> str:
    data = masked_in_file(real)
    where = f" ({_PLACES.get(data.place, data.place)} {data.path})" if data.place else ""
    if data.place is None:
        value = f"set nowhere: the engine's default{'' if data.file is None else f' ({data.file})'}"
    else:
        value = f"file {show_value(data.file)}{where}"
    if code is _C.CONFIG_ARGUMENT_PIN_MISMATCH:
        value += f", spec pins {data.spec}"
    elif code is _C.CONFIG_ARGUMENT_MATCHES_SPEC:
        value += "; matches spec"
    hidden = [
        f"{_PLACES.get(o.place, o.place)} says {show_value(o.value)}" for o in data.overridden
    ]
    return value + "".join(f"; overridden: {h}" for h in hidden)


def _unit(code: CheckCode, data: UnitState) -> str:
    if code is _C.CONFIG_UNIT_STALE:
        return (
            f"systemd unit {data.unit} changed on disk and is not reloaded: a restart would run "
            "its old command line (systemctl daemon-reload, or manage_unit = true)"
        )
    if code is _C.CONFIG_UNIT_UNKNOWN:
        return f"systemd did not say whether unit {data.unit} must be reloaded"
    return f"systemd unit {data.unit} loaded as it is on disk"


def _argv(data: ArgumentLive) -> str:
    """``argv 64 (command line)``, ``argv 64 (from --config)``, ``argv unset (engine default)``,
    or, for a process that writes over its command line, what it reports."""
    if data.live_source == "config":
        return f"argv {show_value(data.live)} (from --config)"
    if data.live_source == "cmdline":
        return f"argv {show_value(data.live)} (command line)"
    if data.live_source == "reported":
        return f"argv written over by the process, which reports {show_value(data.live)}"
    return f"argv {show_value(data.live)} (engine default)"


def _argument_live(code: CheckCode, real: ArgumentLive) -> str:
    data = masked_argument_live(real)
    argv, file = _argv(data), show_value(data.file)
    if data.engine_known:
        engine = f"the engine reports {show_value(data.engine)} ({data.engine_field})"
    else:
        engine = "the engine does not report it (unknown)"
    if code is _C.LIVE_ENGINE_DIFFERS:
        return (
            f"file {file}, {argv}, but {engine}: the engine disagrees (a default or another "
            "setting overrides the argument)"
        )
    match data.verdict:
        case LiveVerdict.MATCH:
            return f"{argv} = file; {engine}"
        case LiveVerdict.UNSET:
            return f"not set in file or on the command line (engine default); {engine}"
        case LiveVerdict.RESTART_NEEDED:
            return f"in file but not live: restart needed (file {file}, {argv}); {engine}"
        case LiveVerdict.LOST_ON_RESTART:
            return f"live but not in file: lost on next restart ({argv}); {engine}"
        case LiveVerdict.DIFFERS:
            return f"differs: file {file}, {argv} (restart needed); {engine}"
        case _:
            assert_never(data.verdict)


def _knob_in_file(code: CheckCode, data: KnobInFile) -> str:
    file, spec = mask(data.knob, data.file), mask(data.knob, data.spec)
    if code is _C.CONFIG_PIN_MISMATCH:
        return f"file {show_value(file)}, spec pins {spec}" + _config_tail(data)
    value = f"file {file}" if data.file is not None else "not set in file (engine default)"
    pinned = "; matches spec" if code is _C.CONFIG_MATCHES_SPEC else ""
    return value + pinned + _config_tail(data)


def _config_tail(data: KnobInFile) -> str:
    """``; changed since backup: …`` / ``; same as backup`` and a disagreeing recorded change
    (a secret knob's recorded value is masked in the ledger: not compared)."""
    tail = ""
    backup, file, recorded = (mask(data.knob, v) for v in (data.backup, data.file, data.recorded))
    if data.backup_path is not None and data.backup != data.file:
        tail += f"; changed since backup: {show_value(backup)} -> {show_value(file)}"
    elif data.backup_path is not None:
        tail += "; same as backup"
    if data.recorded_change_id is not None and data.recorded not in (data.file, REDACTED):
        tail += (
            f"; the last recorded change (#{data.recorded_change_id}) set "
            f"{show_value(recorded)}: edited outside servelab?"
        )
    return tail


def _process(code: CheckCode, data: LiveProcess) -> str:
    if code is _C.LIVE_NO_PROCESS:
        return f"no running process found ({data.pid_source})"
    if code is _C.LIVE_FILE_UNREADABLE:
        return f"pid {data.pid}: env file unreadable"
    return f"pid {data.pid} ({data.pid_source}); no declared knobs"


def _knob_live(real: KnobLive) -> str:
    data = masked_knob_live(real)
    words = describe_verdict(data.verdict)
    match data.verdict:
        case LiveVerdict.MATCH:
            return f"live {data.live} = file"
        case LiveVerdict.UNSET:
            return words
        case LiveVerdict.RESTART_NEEDED:
            return f"{words} (file {data.file})"
        case LiveVerdict.LOST_ON_RESTART:
            return f"{words} (live {data.live})"
        case LiveVerdict.DIFFERS:
            return f"differs: file {data.file}, live {data.live} (restart needed)"
        case _:
            assert_never(data.verdict)


def _health(code: CheckCode, data: HealthProbe) -> str:
    if code is _C.HEALTH_UNREACHABLE:
        return f"{data.path}: unreachable: {data.error}"
    if code is _C.HEALTH_HTTP_ERROR:
        return f"{data.path}: HTTP {data.status}: {data.body or ''}"
    ready = _ready(data)
    if code is _C.HEALTH_WORKER_READY:
        return f"{ready}; {WORKER_NOTE}"
    if code is _C.HEALTH_WORKERS_MISSING:
        return (
            f"{ready}; but the router does not list {', '.join(data.missing or ())} "
            "(out of the router: `servelab restart --rolling NAME` puts a worker back)"
        )
    if code is _C.HEALTH_WORKERS_MISREGISTERED:
        wrong = [_misregistered(row) for row in data.workers or () if row.misregistered]
        return f"{ready}; but the router registered {'; '.join(wrong)}"
    if code is _C.HEALTH_WORKERS_UNKNOWN:
        stale = [f"{w.url} ({w.role or 'no role'}; remove it: `{shlex.join(w.remove)}`)"
                 for w in data.unknown or ()]  # fmt: skip
        return f"{ready}; but the router lists a worker the spec does not have: {', '.join(stale)}"
    return ready


def _misregistered(row: WorkerListing) -> str:
    parts = []
    if row.router_role is not None:
        parts.append(f"as {row.router_role} (the spec: {row.role})")
    if row.router_bootstrap_port is not None:
        parts.append(
            f"with bootstrap port {row.router_bootstrap_port} (the spec: {row.spec_bootstrap_port})"
        )
    return f"{row.service} " + " and ".join(parts)


def _ready(data: HealthProbe) -> str:
    text = f"{data.path} {data.status} in {data.elapsed_s * 1000:.0f} ms"
    if data.healthy_workers is not None:
        text += f" ({data.healthy_workers}/{data.total_workers} workers healthy)"
    if data.workers:
        text += "; router lists " + ", ".join(_listed(row) for row in data.workers)
    return text


def _listed(row: WorkerListing) -> str:
    if not row.listed:
        return f"{row.service} missing"
    return f"{row.service} {'healthy' if row.healthy else 'unhealthy'}"


def _request_failure(timing: RequestTiming | None) -> str:
    """Why one e2e request failed: its error (``HTTP 500``, ``idle timeout``...) and what came with
    it, else that the stream held no content token."""
    if timing is None or timing.error is None:
        return "no content tokens in the stream"
    snippet = timing.error_detail or ""
    return timing.error.replace("http ", "HTTP ", 1) + (f": {snippet}" if snippet else "")


def _e2e(code: CheckCode, data: E2EProbe) -> str:
    if code is _C.E2E_FAILED:
        return f"chat completion failed: {_request_failure(data.first)}"
    if code is _C.E2E_SECOND_FAILED:
        return "first request ok, the second failed: " + _request_failure(data.second)
    text = (
        f"{data.status} in {data.total_s:.2f} s, TTFT {data.ttft_s or 0:.2f} s, "
        f"{data.completion_tokens} tokens; {data.start} ({_start_reason(data)})"
    )
    if data.second is not None:
        text += f"; second probe {data.second.total_s:.2f} s"
    return text + ("" if data.path is None else f"; path: {route_text(data.path)}")


def _start_reason(data: E2EProbe) -> str:
    """Why the first request counts as cold or warm (:mod:`servelab.core.verify.coldstart`),
    with the timings it was judged on."""
    second_s = data.second.total_s if data.second is not None else 0.0
    match data.start_reason:
        case StartReason.FIRST_SINCE_START:
            return "first request since the decode started"
        case StartReason.SERVED_BEFORE:
            before = data.decode_requests_before
            served = sum(before) if before is not None else "some"
            return f"decode served {served} request(s) before"
        case StartReason.NO_SECOND_PROBE:
            return "no second probe to compare with"
        case StartReason.SLOWER_THAN_SECOND:
            times = data.total_s / max(second_s, 1e-6)
            return f"{times:.1f}x slower than an immediate second probe"
        case StartReason.SECOND_PROBE:
            return f"an immediate second probe took {second_s:.2f} s"
        case None:
            return "no reason recorded"
        case _:
            assert_never(data.start_reason)


def _gap(gap: Gap | None) -> str:
    """Why a worker's requests could not be counted (:class:`Gap`; None: an older row's)."""
    match gap:
        case Gap.NO_METRICS:
            return (
                "its /metrics did not answer (SGLang serves it only with --enable-metrics) and "
                "the router's per-worker counter could not be read"
            )
        case Gap.NO_ENGINE_SERIES:
            return (
                "its /metrics has none of the engine's series (vLLM: --disable-log-stats) and "
                "the router's per-worker counter could not be read"
            )
        case None:
            return "no served-request counter (not a servelab sim)"
        case _:
            assert_never(gap)


def _counter(data: WorkerReach) -> str:
    """The counter a reach was read by: its name and whose (an older row: "served requests")."""
    match data.signal:
        case Signal.ENGINE:
            return f"its {data.counter}"
        case Signal.ROUTER:
            return f"the router's {data.counter}"
        case None:
            return "served requests"
        case _:
            assert_never(data.signal)


def _reach(code: CheckCode, data: WorkerReach) -> str:
    if code is _C.E2E_WORKER_UNCOUNTED:
        unknown = "not proven" if data.gap is None else "unknown"
        return (
            f"{unknown}: {_gap(data.gap)}; {data.requests_sent} request(s) went through {data.via}"
        )
    if code is _C.E2E_WORKER_UNREACHED:
        return (
            f"not reached through {data.via}: {_counter(data)} stayed at {data.served_before} over "
            f"{data.requests_sent} request(s) (HTTP {', '.join(str(s) for s in data.statuses)})"
        )
    return (
        f"reached through {data.via}: {_counter(data)} {data.served_before} -> "
        f"{data.served_after} after {data.requests_sent} request(s)"
    )


# -- JSON with the reasons ----------------------------------------------------------------------


def _check_json(check: CheckRecord) -> JsonObject:
    """The check's flat JSON (``{**data, "layer", "service", "ok", "code"}``) with its outcome
    as ``result`` (``pass``, ``fail``, ``skip``: a skipped layer is not a pass) and its reason as
    ``detail``."""
    flat: JsonObject = encode(check, StoredCheck)
    return {**flat, "result": result_of(check).value, "detail": check_detail(check)}


def with_details(checks: Any) -> list[Any]:
    """A list of checks' flat JSON (as a ``restart`` report or a case event holds them), each with
    its reason as ``detail``; anything else in the list is left as it is."""
    return [_check_json(read_check(c)) if isinstance(c, Mapping) else c for c in checks or ()]


def verify_json(report: VerifyReport) -> str:
    """``verify --json``: the report with every check's reason as ``detail``."""
    return json_text({**encode(report), "checks": [_check_json(check) for check in report.checks]})


# -- tables -------------------------------------------------------------------------------------


def _what(check: Check) -> str:
    """What the check is about, beside its service: the knob, the probed path, the model."""
    match check.data:
        case (
            KnobInFile(knob=knob) | KnobLive(knob=knob) | KnobLiveVsSpec(knob=knob)
            | ArgumentInFile(knob=knob) | ArgumentLive(knob=knob)
        ):  # fmt: skip
            return str(knob)
        case UnitState(unit=unit):
            return unit
        case HealthProbe(path=path):
            return path
        case E2EProbe(model=model) | AnswerProbes(model=model):
            return model
    return ""


def _layer_table(layer: Layer, checks: Sequence[Check]) -> Table:
    table = Table(title=_TITLES[layer], title_justify="left", expand=False)
    table.add_column("service", no_wrap=True)
    table.add_column("knob" if layer in (Layer.CONFIG, Layer.LIVE) else "what", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("detail / reason", overflow="fold")
    for check in checks:
        table.add_row(
            Text(check.service),
            Text(_what(check)),
            Text(result_of(check).value.upper()),
            Text(check_detail(check)),
        )
    return table


def _summary(report: VerifyReport) -> str:
    failed = report.failures
    head = "PASS" if report.ok else "FAIL"
    skipped = sum(result_of(check) is CheckResult.SKIP for check in report.checks)
    passed = len(report.checks) - len(failed) - skipped
    line = f"verify {head}: {passed}/{len(report.checks)} checks passed"
    line += f", {skipped} skipped" if skipped else ""
    line += f" in {report.elapsed_s:.2f} s"
    if report.verification_id is not None:
        line += f"; recorded as verification #{report.verification_id}"
    for check in failed:
        line += f"\n  FAIL {check.layer} {check.service}: {check_detail(check)}"
    return line


def render_verify(report: VerifyReport) -> str:
    """One table per layer (in layer order), then a summary naming every failure."""
    tables = [_layer_table(layer, report.layer(layer)) for layer in Layer if report.layer(layer)]
    return plain_text(*tables) + _summary(report) + "\n"
