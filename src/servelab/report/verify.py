"""Text renderings of verifications: each check's reason, one table per layer and a summary (no I/O,
returns str).

A check carries an outcome code and its data, a type per kind (:mod:`servelab.core.verify.checks`);
:func:`check_detail` words it by matching on that type, for a live check and a ledger row alike (an
older ledger's row that stored its sentence instead of a code reads that sentence). The config and
live layers' sentences are here; a layer with words of its own has its module: the pair's
(:mod:`servelab.report.pair`), the readiness endpoints' (:mod:`servelab.report.health`), the e2e
requests' (:mod:`servelab.report.e2e`) and the answer probes' (:mod:`servelab.report.probes`).
:func:`with_details` gives a check's JSON with that sentence as ``detail``: what ``verify --json``,
``restart --json`` and ``ledger export`` print.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, assert_never

from rich.table import Table
from rich.text import Text

from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import UnreadKnob
from servelab.core.ledger.codec import encode
from servelab.core.redaction import REDACTED, mask, redact
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
    EnvFileFailure,
    EnvFileNoKnobs,
    KnobInFile,
    KnobLive,
    KnobLiveVsSpec,
    KnobNotReadBack,
    Layer,
    LayerSkipped,
    LiveProcess,
    NoEnvFile,
    RouterLaunch,
    SkipReason,
)
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe, WorkerReach
from servelab.core.verify.health import HealthProbe
from servelab.core.verify.masked import (
    CheckResult,
    masked_argument_live,
    masked_in_file,
    masked_knob_live,
    result_of,
)
from servelab.core.verify.pair import PairReport
from servelab.core.verify.record import CheckRecord, StoredCheck, UntypedCheck, read_check
from servelab.report.document import Worded, document_text
from servelab.report.e2e import describe_e2e, describe_reach
from servelab.report.health import describe_health
from servelab.report.knob import describe_unread, describe_verdict
from servelab.report.pair import describe_pair
from servelab.report.probes import describe_probes
from servelab.report.relaunch import changed_settings
from servelab.report.text import plain_text, show_value

__all__ = [
    "CheckDocument",
    "CheckWords",
    "VerificationWords",
    "check_detail",
    "check_document",
    "render_verify",
    "verification_document",
    "verify_json",
    "with_details",
]

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
        case KnobNotReadBack(pid=pid, knob=knob, file=real_file):
            file = "unset" if real_file is None else mask(knob, real_file)
            return (f"not read back (file {file}): pid {pid}, a router, wrote over its "
                    "environment; not known to be live, not known not to be")  # fmt: skip
        case KnobLiveVsSpec(knob=knob, live=real_live, spec=real_spec):
            live, spec = mask(knob, real_live), mask(knob, real_spec)
            pinned = f", spec pins {spec}" if spec is not None else ""
            return f"live {show_value(live)}{pinned}; no env file to compare"
        case HealthProbe():
            return describe_health(code, data)
        case E2EProbe():
            return describe_e2e(code, data)
        case WorkerReach():
            return describe_reach(code, data)
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
        case RouterLaunch(pid=pid, changes=()):
            return f"pid {pid} (pid record): launched with the router settings the spec gives"
        case RouterLaunch(pid=pid, changes=changes):
            return (f"pid {pid} (pid record) was launched with other router settings than the "
                    f"spec's: {changed_settings(changes)}; restart the router")  # fmt: skip
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
    said = _knob_live_words(real)
    if not real.launched:
        return said
    return (f"{said}; pid {real.pid}, a router, wrote over its environment: its live value is "
            "the env file servelab copied when it launched it")  # fmt: skip


def _knob_live_words(real: KnobLive) -> str:
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


# -- JSON with the reasons ----------------------------------------------------------------------


@dataclass(frozen=True)
class CheckWords:
    """A check's words in its ``--json``: its outcome (``pass``, ``fail``, ``skip``: a skipped
    layer is not a pass) and its reason."""

    result: str
    detail: str


#: A check as ``--json`` shows it: its flat JSON (``{**data, "layer", "service", "ok", "code"}``)
#: with its words.
CheckDocument = Worded[CheckRecord, CheckWords]


@dataclass(frozen=True)
class VerificationWords:
    """A verification's checks, each with its words, in place of its bare checks."""

    checks: list[CheckDocument]


def check_document(check: CheckRecord) -> CheckDocument:
    """The check's flat JSON with its outcome as ``result`` and its reason as ``detail``."""
    words = CheckWords(result_of(check).value, check_detail(check))
    return Worded(check, words, kind=StoredCheck)


def verification_document(report: VerifyReport) -> Worded[VerifyReport, VerificationWords]:
    """The verification with every check's reason (``verify --json``, and inside a restart's or a
    case action's document)."""
    return Worded(report, VerificationWords([check_document(c) for c in report.checks]))


def with_details(checks: Any) -> list[Any]:
    """A list of checks' flat JSON as stored (a stored restart report's or case event's), each
    with its reason as ``detail``; anything else in the list is left as it is."""
    return [
        encode(check_document(read_check(c))) if isinstance(c, Mapping) else c for c in checks or ()
    ]


def verify_json(report: VerifyReport) -> str:
    """``verify --json``: the report with every check's reason as ``detail``."""
    return document_text(verification_document(report))


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
            return redact(model)  # the entry point's name for it: a token in it masked
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
