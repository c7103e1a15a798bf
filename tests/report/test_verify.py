"""How a check reads: every outcome code rendered from its data (the sentences of docs/verify.md),
an older ledger row's stored sentence, and the JSON that carries the reasons."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from servelab.core.answers.answer import Failure
from servelab.core.answers.probes import ProbeKind
from servelab.core.answers.transfer import AnswerSite
from servelab.core.deploy.relaunch import SettingChange
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob
from servelab.core.ledger.codec import encode
from servelab.core.restart.contract import RestartReport
from servelab.core.verify.answers import AnswerProbes, ProbeOutcome
from servelab.core.verify.arguments import (
    ArgumentDropped,
    ArgumentInFile,
    ArgumentLive,
    Overridden,
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
from servelab.core.verify.coldstart import Start, StartReason
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe, RequestTiming, WorkerReach
from servelab.core.verify.health import HealthProbe, StaleWorker, WorkerListing
from servelab.core.verify.longprompt import EngineLimit, LongProbe, LongSkip
from servelab.core.verify.pair import (
    FieldRule,
    FieldVerdict,
    PairFieldCheck,
    PairReport,
    PairValue,
)
from servelab.core.verify.record import StoredCheck, UntypedCheck, read_check, read_check_row
from servelab.ops.verify.e2e import E2EOptions, _classify
from servelab.report.deploy import render_restart, restart_json
from servelab.report.health import WORKER_NOTE
from servelab.report.verify import check_detail, render_verify, verify_json, with_details
from tests.support import REPO

C = CheckCode
K = "SGLANG_SM120_MMA_TARGET_CTAS"
_PD = HealthProbe("/health", 200, 0.012)
_LAYERS = tuple(Layer)


def _file(file: str | None, spec: str | None = None, backup: str | None = None,
          backup_path: str | None = None, **recorded: Any) -> KnobInFile:  # fmt: skip
    return KnobInFile(K, file, spec, backup, backup_path, "/env/decode.env", **recorded)


def _live(verdict: LiveVerdict, file: str | None, live: str | None) -> KnobLive:
    return KnobLive(4242, "pid record", K, file, live, verdict)


def _e2e(status: int | None, total_s: float, ttft_s: float | None, error: str | None = None,
         error_detail: str | None = None, tokens: int = 16, **more: Any) -> E2EProbe:  # fmt: skip
    first = RequestTiming(status, ttft_s, total_s, tokens, 512, error, error_detail)
    return replace(E2EProbe.of("m", first, more.pop("before", None)), **more)


def _second(total_s: float, error: str | None = None, detail: str | None = None) -> RequestTiming:
    return RequestTiming(None if error else 200, 0.01, total_s, 16, 512, error, detail)


_LIMIT = EngineLimit("prefill", "max_req_input_len", 163_834)
_LONG_SENT = LongProbe(8192, (_LIMIT,), None, 200, 0.16, 0.17, 8188, 16)
_LONG_SKIPPED = LongProbe(None, (EngineLimit("prefill", "max_model_len", None),), LongSkip.NO_LIMIT)
_LONG_FAILED = LongProbe(8192, (_LIMIT,), None, 200, None, 0.2, None, 0, "error in stream",
                         "Decode transfer failed")  # fmt: skip


def _reach(before: int | None, after: int | None, sent: int,
           statuses: tuple[int | None, ...] = ()) -> WorkerReach:  # fmt: skip
    return WorkerReach("decode", "router", before, after, sent, statuses)


MRR, OVERLAP = "--max-running-requests", "--disable-overlap-schedule"
EFFECTIVE = "internal_states[0].effective_max_running_requests_per_dp"


def _arg(
    verdict: LiveVerdict, file: str | None, live: str | None, *, source: str = "cmdline",
    engine: str | None = None,
) -> ArgumentLive:  # fmt: skip
    known = engine is not None
    return ArgumentLive(42, "pid record", MRR, file, live, source, verdict, known, engine,
                        EFFECTIVE if known else None)  # fmt: skip


_LISTED = (WorkerListing("decode-1", "http://d1", "decode", False, False),
           WorkerListing("decode-2", "http://d2", "decode", True, True))  # fmt: skip
_ROUTER = HealthProbe("/readiness", 200, 0.009, healthy_workers=3, total_workers=3,
                      workers=_LISTED, missing=("decode-1",))  # fmt: skip


def _side(value: str | None, field: str, source: str = "default") -> PairValue:
    return PairValue(True, value, field, source)


_MODEL = PairFieldCheck("model", FieldRule.EQUAL, _side("m", "served_model_name"),
                        _side("m", "served_model_name"), FieldVerdict.MATCH)  # fmt: skip
_TP = PairFieldCheck("tp_size", FieldRule.DIVIDES, _side("8", "tp_size"), _side("4", "tp_size"),
                     FieldVerdict.MATCH)  # fmt: skip
_PAGE = PairFieldCheck("page_size", FieldRule.EQUAL, _side("64", "page_size", "cmdline"),
                       _side("32", "page_size", "config"), FieldVerdict.MISMATCH)  # fmt: skip
_UNREPORTED = PairFieldCheck(
    "page_size", FieldRule.DECODE_MULTIPLE, PairValue(False),
    _side("16", "vllm_config.cache_config.block_size"), FieldVerdict.UNKNOWN,
)  # fmt: skip

_OK = (ProbeOutcome(0, ProbeKind.PLAIN, False), ProbeOutcome(1, ProbeKind.TOOL, False),
       ProbeOutcome(2, ProbeKind.RETRIEVAL, False, recalled=True))  # fmt: skip
_BAD = (
    ProbeOutcome(0, ProbeKind.PLAIN, True, at=1, first_token_agrees=True, text="The stone river",
                 reference="The garden window"),
    ProbeOutcome(1, ProbeKind.TOOL, True, (Failure.TOOL_JSON,), at=1, first_token_agrees=True,
                 text='{"city": "x', reference='{"city": "Oslo"}'),
    ProbeOutcome(2, ProbeKind.RETRIEVAL, True, recalled=False, at=1, first_token_agrees=True,
                 text="The key 12", reference="The pass key is 123456."),
)  # fmt: skip

#: (code, data, the sentence): every row of docs/verify.md's tables, and the edges between them.
CASES: list[tuple[CheckCode, CheckData, str]] = [
    (C.CONFIG_ARGUMENT_DROPPED,
     ArgumentDropped("--enable-prefix-caching", "/etc/vllm/decode.yaml",
                     "enable-prefix-caching: false"),
     "the config file /etc/vllm/decode.yaml writes `enable-prefix-caching: false`, which the "
     "engine drops (vLLM keeps no false in --config): --enable-prefix-caching runs at the "
     "engine's default; write `no-enable-prefix-caching: true` to turn it off"),
    (C.HEALTH_WORKERS_MISREGISTERED,
     HealthProbe("/readiness", 200, 0.009, workers=(
         WorkerListing("prefill", "http://p", "prefill", True, True, None, 8999, 8998),
         WorkerListing("decode", "http://d", "decode", True, True, "prefill"))),
     "/readiness 200 in 9 ms; router lists prefill healthy, decode healthy; but the router "
     "registered prefill with bootstrap port 8999 (the spec: 8998); decode as prefill (the spec: "
     "decode)"),
    (C.HEALTH_WORKERS_UNKNOWN,
     HealthProbe("/readiness", 200, 0.009, unknown=(StaleWorker(
         "http://10.0.0.9:30002", "decode", "w7",
         ("curl", "-X", "DELETE", "http://127.0.0.1:30001/workers/w7")),)),
     "/readiness 200 in 9 ms; but the router lists a worker the spec does not have: "
     "http://10.0.0.9:30002 (decode; remove it: `curl -X DELETE "
     "http://127.0.0.1:30001/workers/w7`)"),
    (C.HEALTH_WORKERS_UNREADABLE,
     HealthProbe("/readiness", 200, 0.009, workers_error="WorkerListError: GET http://r/workers: "
                 'not a worker list: "workers" is a string, not a list: {"workers": "oops"}'),
     "/readiness 200 in 9 ms; but the router's worker list cannot be read: WorkerListError: GET "
     'http://r/workers: not a worker list: "workers" is a string, not a list: {"workers": '
     '"oops"}'),
    (C.HEALTH_BOOTSTRAP_MISMATCH,
     HealthProbe("/health", 200, 0.004, listening_bootstrap_port=41199, spec_bootstrap_port=41198),
     "/health 200 in 4 ms; but it listens for the KV bootstrap on port 41199, while the spec "
     "says 41198 (the port the router tells each decode): every hand-off would wait on the wrong "
     "port — make the spec's bootstrap_port and the engine's --disaggregation-bootstrap-port the "
     "same"),
    (C.LIVE_KNOB_UNREAD, UnreadKnob("VLLM_ATTENTION_BACKENDS", "vllm", "0.26.0",
                                    ReadVerdict.NOT_READ, "VLLM_ATTENTION_BACKEND"),
     "not read by vLLM 0.26.0 (did you mean VLLM_ATTENTION_BACKEND?): the engine ignores it, so "
     "it changes nothing (reads_env declares a variable a custom build reads)"),
    (C.LIVE_READS_UNKNOWN, UnreadKnob("SGLANG_X", "sglang", "0.5.20", ReadVerdict.UNKNOWN),
     "unknown whether SGLang 0.5.20 reads it: no list of its variables is kept (declare it under "
     "reads_env if the build reads it)"),
    (C.PAIR_ERROR, CheckFailure("HostError: x"), "HostError: x"),
    (C.PAIR_MATCH, PairReport("prefill", "decode", (_MODEL, _TP)),
     "prefill -> decode agree: model m, TP size 8/4"),
    (C.PAIR_MISMATCH, PairReport("prefill", "decode", (_MODEL, _PAGE)),
     "prefill -> decode cannot hand off KV: page size 64 (page_size, from its command line) on "
     "prefill vs 32 (page_size, from its config file) on decode (must be equal)"),
    (C.PAIR_UNKNOWN, PairReport("prefill", "decode", (_MODEL, _UNREPORTED),
                                prefill_error="prefill: no /server_info answer"),
     "prefill -> decode: unknown, not a pass: page size not reported by both (prefill: no "
     "/server_info answer)"),
    (C.CONFIG_NO_ENV_FILE, NoEnvFile(False), "no env_file in the spec"),
    (C.CONFIG_NO_ENV_FILE, NoEnvFile(True),
     "no env_file in the spec; declared knobs are compared live against the spec only"),
    (C.CONFIG_MISSING, EnvFileFailure("/etc/sglang/decode.env"),
     "env file /etc/sglang/decode.env does not exist"),
    (C.CONFIG_UNREADABLE, EnvFileFailure("d.env", "d.env:3: 'export' is shell"),
     "d.env:3: 'export' is shell"),
    (C.CONFIG_UNREADABLE, EnvFileFailure("d.env", None), "unreadable"),
    (C.CONFIG_ERROR, EnvFileFailure("d.env", "HostError: x"), "HostError: x"),
    (C.CONFIG_NO_KNOBS, EnvFileNoKnobs("d.env"), "env file parses; no declared knobs"),
    (C.CONFIG_MATCHES_SPEC, _file("512", "512"), "file 512; matches spec"),
    (C.CONFIG_MATCHES_SPEC, _file("512", "512", "384", "/env/decode.env.bak"),
     "file 512; matches spec; changed since backup: 384 -> 512"),
    (C.CONFIG_NOT_PINNED, _file("384", None, "384", "/env/decode.env.bak"),
     "file 384; same as backup"),
    (C.CONFIG_NOT_PINNED, _file(None), "not set in file (engine default)"),
    (C.CONFIG_NOT_PINNED, _file("128", None, "256", "/b", recorded="256", recorded_change_id=7),
     "file 128; changed since backup: 256 -> 128; the last recorded change (#7) set 256: "
     "edited outside servelab?"),
    (C.CONFIG_NOT_PINNED, _file("256", recorded="256", recorded_change_id=7), "file 256"),
    (C.CONFIG_PIN_MISMATCH, _file("256", "512"), "file 256, spec pins 512"),
    (C.CONFIG_PIN_MISMATCH, _file(None, "512"), "file (unset), spec pins 512"),
    (C.LIVE_ERROR, CheckFailure("HostError: permission denied"), "HostError: permission denied"),
    (C.LIVE_NO_PROCESS, LiveProcess(None, "no pid record, unit or listener"),
     "no running process found (no pid record, unit or listener)"),
    (C.LIVE_NO_KNOBS, LiveProcess(16490, "pid record"),
     "pid 16490 (pid record); no declared knobs"),
    (C.LIVE_FILE_UNREADABLE, LiveProcess(4242, "pid record"), "pid 4242: env file unreadable"),
    (C.LIVE_MATCH, _live(LiveVerdict.MATCH, "512", "512"), "live 512 = file"),
    (C.LIVE_UNSET, _live(LiveVerdict.UNSET, None, None),
     "not set in file or live (engine default)"),
    (C.LIVE_RESTART_NEEDED, _live(LiveVerdict.RESTART_NEEDED, "512", None),
     "in file but not live: restart needed (file 512)"),
    (C.LIVE_LOST_ON_RESTART, _live(LiveVerdict.LOST_ON_RESTART, None, "512"),
     "live but not in file: lost on next restart (live 512)"),
    (C.LIVE_DIFFERS, _live(LiveVerdict.DIFFERS, "384", "512"),
     "differs: file 384, live 512 (restart needed)"),
    (C.LIVE_NO_ENV_FILE, KnobLiveVsSpec(4242, "pid record", K, "512", "512"),
     "live 512, spec pins 512; no env file to compare"),
    (C.LIVE_NO_ENV_FILE, KnobLiveVsSpec(4242, "pid record", K, None, None),
     "live (unset); no env file to compare"),
    (C.LIVE_NOT_READ_BACK, KnobNotReadBack(4242, "pid record", "SERVELAB_SIM_TIME_SCALE", "0.25"),
     "not read back (file 0.25): pid 4242, a router, wrote over its environment; not known to be "
     "live, not known not to be"),
    (C.LIVE_NOT_READ_BACK, KnobNotReadBack(4242, "pid record", "API_TOKEN", "sk-abcdef123456"),
     "not read back (file ***): pid 4242, a router, wrote over its environment; not known to be "
     "live, not known not to be"),
    (C.LIVE_NOT_READ_BACK, KnobNotReadBack(4242, "pid record", K, None),
     "not read back (file unset): pid 4242, a router, wrote over its environment; not known to "
     "be live, not known not to be"),
    (C.LIVE_ROUTER_AS_SPEC, RouterLaunch(4242),
     "pid 4242 (pid record): launched with the router settings the spec gives"),
    (C.LIVE_ROUTER_RESTART_NEEDED,
     RouterLaunch(4242, (SettingChange("policy", "--policy", "cache_aware", "round_robin"),
                         SettingChange("--disable-retries", "--disable-retries", None, ""))),
     "pid 4242 (pid record) was launched with other router settings than the spec's: policy: "
     "spec cache_aware, live round_robin; --disable-retries: spec not given, live given; "
     "restart the router"),
    (C.HEALTH_ERROR, CheckFailure("SSHError: no route"), "SSHError: no route"),
    (C.HEALTH_UNREACHABLE, HealthProbe("/health", None, 0.001, error="refused"),
     "/health: unreachable: refused"),
    (C.HEALTH_HTTP_ERROR, HealthProbe("/readiness", 503, 0.002, body="no workers"),
     "/readiness: HTTP 503: no workers"),
    (C.HEALTH_READY, HealthProbe("/readiness", 200, 0.011, healthy_workers=2, total_workers=2),
     "/readiness 200 in 11 ms (2/2 workers healthy)"),
    (C.HEALTH_READY, HealthProbe("/health", 200, 0.003), "/health 200 in 3 ms"),
    (C.HEALTH_WORKER_READY, _PD, f"/health 200 in 12 ms; {WORKER_NOTE}"),
    (C.E2E_ERROR, CheckFailure("HostError: no forward"), "HostError: no forward"),
    (C.E2E_FAILED, _e2e(500, 0.1, None, "http 500", "boom", 0),
     "chat completion failed: HTTP 500: boom"),
    (C.E2E_FAILED, _e2e(None, 120.0, None, "idle timeout", "", 0),
     "chat completion failed: idle timeout"),
    (C.E2E_FAILED, _e2e(200, 0.1, None, tokens=0),
     "chat completion failed: no content tokens in the stream"),
    (C.E2E_SECOND_FAILED, _e2e(200, 0.1, 0.02, second=_second(0.1, "http 502", "gateway")),
     "first request ok, the second failed: HTTP 502: gateway"),
    (C.E2E_PASSED, _e2e(200, 0.09, 0.02, before=(2,), start=Start.WARM,
                        start_reason=StartReason.SERVED_BEFORE),
     "200 in 0.09 s, TTFT 0.02 s, 16 tokens; warm (decode served 2 request(s) before)"),
    (C.E2E_PASSED, _e2e(200, 8.59, 8.52, before=(0,), start=Start.COLD, second=_second(0.09),
                        start_reason=StartReason.FIRST_SINCE_START),
     "200 in 8.59 s, TTFT 8.52 s, 16 tokens; cold (first request since the decode started); "
     "second probe 0.09 s"),
    (C.E2E_PASSED, _e2e(200, 4.61, 4.5, start=Start.COLD, second=_second(0.1),
                        start_reason=StartReason.SLOWER_THAN_SECOND),
     "200 in 4.61 s, TTFT 4.50 s, 16 tokens; cold (46.1x slower than an immediate second probe); "
     "second probe 0.10 s"),
    (C.E2E_PASSED, _e2e(200, 0.12, 0.05, start=Start.WARM, second=_second(0.1),
                        start_reason=StartReason.SECOND_PROBE),
     "200 in 0.12 s, TTFT 0.05 s, 16 tokens; warm (an immediate second probe took 0.10 s); "
     "second probe 0.10 s"),
    (C.E2E_PASSED, _e2e(200, 0.09, 0.02, before=(2,), start=Start.WARM,
                        start_reason=StartReason.SERVED_BEFORE, long=_LONG_SENT),
     "200 in 0.09 s, TTFT 0.02 s, 16 tokens; warm (decode served 2 request(s) before); long "
     "prompt 8,188 tokens (capped at 8,192; prefill's max_req_input_len 163,834) 0.17 s, TTFT "
     "0.16 s"),
    (C.E2E_PASSED, _e2e(200, 0.09, 0.02, before=(2,), start=Start.WARM,
                        start_reason=StartReason.SERVED_BEFORE, long=_LONG_SKIPPED),
     "200 in 0.09 s, TTFT 0.02 s, 16 tokens; warm (decode served 2 request(s) before); long "
     "prompt skipped: no worker said its input limit (prefill max_model_len)"),
    (C.E2E_LONG_FAILED, _e2e(200, 0.09, 0.02, long=_LONG_FAILED),
     "short prompts ok, a long prompt of 8,192 tokens (capped at 8,192; prefill's "
     "max_req_input_len 163,834) failed (status 200): error in stream: Decode transfer failed; "
     "the KV transfer of long prompts fails (transfer buffers smaller than the longest prompt the "
     "engines admit?)"),
    (C.HEALTH_WORKERS_MISSING, _ROUTER,
     "/readiness 200 in 9 ms (3/3 workers healthy); router lists decode-2 healthy; but the "
     "router does not list decode-1 (out of the router: `servelab restart --rolling NAME` puts "
     "a worker back)"),
    (C.HEALTH_WORKERS_MISSING,
     HealthProbe("/readiness", 503, 0.009, healthy_workers=0, total_workers=0, workers=(
         WorkerListing("prefill", "http://p", "prefill", False, False),
         WorkerListing("decode", "http://d", "decode", False, False)),
         missing=("prefill", "decode")),
     "/readiness 503 in 9 ms (0/0 workers healthy); but the router does not list prefill, decode "
     "(out of the router: `servelab restart --rolling NAME` puts a worker back)"),
    (C.E2E_WORKER_REACHED, _reach(4, 5, 3),
     "reached through router: served requests 4 -> 5 after 3 request(s)"),
    (C.E2E_WORKER_UNREACHED, _reach(4, 4, 2, (200, 200)),
     "not reached through router: served requests stayed at 4 over 2 request(s) (HTTP 200, 200)"),
    (C.CONFIG_ARGUMENT_NOT_PINNED,
     ArgumentInFile(MRR, "64", "args_env", "/e/d.env", None, (Overridden("config_file", "32"),)),
     "file 64 (the args_env variable /e/d.env); overridden: the config file says 32"),
    (C.CONFIG_ARGUMENT_NOT_PINNED, ArgumentInFile(MRR, None, None, None, None),
     "set nowhere: the engine's default"),
    (C.CONFIG_ARGUMENT_NOT_PINNED, ArgumentInFile(OVERLAP, "off", None, None, None),
     "set nowhere: the engine's default (off)"),
    (C.CONFIG_ARGUMENT_MATCHES_SPEC, ArgumentInFile(MRR, "64", "config_file", "/e/d.yaml", "64"),
     "file 64 (the config file /e/d.yaml); matches spec"),
    (C.CONFIG_ARGUMENT_PIN_MISMATCH, ArgumentInFile(MRR, "32", "args_env", "/e/d.env", "64"),
     "file 32 (the args_env variable /e/d.env), spec pins 64"),
    (C.CONFIG_UNIT_LOADED, UnitState("sglang-decode.service", False),
     "systemd unit sglang-decode.service loaded as it is on disk"),
    (C.CONFIG_UNIT_STALE, UnitState("sglang-decode.service", True),
     "systemd unit sglang-decode.service changed on disk and is not reloaded: a restart would "
     "run its old command line (systemctl daemon-reload, or manage_unit = true)"),
    (C.CONFIG_UNIT_UNKNOWN, UnitState("sglang-decode.service", None),
     "systemd did not say whether unit sglang-decode.service must be reloaded"),
    (C.LIVE_ARGUMENT_MATCH, _arg(LiveVerdict.MATCH, "64", "64", engine="64"),
     f"argv 64 (command line) = file; the engine reports 64 ({EFFECTIVE})"),
    (C.LIVE_ARGUMENT_MATCH, _arg(LiveVerdict.MATCH, "on", "on", source="config"),
     "argv on (from --config) = file; the engine does not report it (unknown)"),
    (C.LIVE_ARGUMENT_UNSET, _arg(LiveVerdict.UNSET, None, None, source="default", engine="128"),
     f"not set in file or on the command line (engine default); the engine reports 128 "
     f"({EFFECTIVE})"),
    (C.LIVE_ARGUMENT_RESTART_NEEDED, _arg(LiveVerdict.RESTART_NEEDED, "64", None,
                                          source="default"),
     "in file but not live: restart needed (file 64, argv (unset) (engine default)); the engine "
     "does not report it (unknown)"),
    (C.LIVE_ARGUMENT_LOST_ON_RESTART, _arg(LiveVerdict.LOST_ON_RESTART, None, "64"),
     "live but not in file: lost on next restart (argv 64 (command line)); the engine does not "
     "report it (unknown)"),
    (C.LIVE_ARGUMENT_DIFFERS, _arg(LiveVerdict.DIFFERS, "64", "32", engine="32"),
     f"differs: file 64, argv 32 (command line) (restart needed); the engine reports 32 "
     f"({EFFECTIVE})"),
    (C.LIVE_ENGINE_DIFFERS, _arg(LiveVerdict.MATCH, "64", "64", engine="128"),
     f"file 64, argv 64 (command line), but the engine reports 128 ({EFFECTIVE}): the engine "
     "disagrees (a default or another setting overrides the argument)"),
    (C.E2E_WORKER_UNCOUNTED, _reach(None, None, 16),
     "not proven: no served-request counter (not a servelab sim); 16 request(s) went through "
     "router"),
    (C.E2E_SKIPPED, LayerSkipped(SkipReason.NO_ENTRY_POINT),
     "skipped: the deployment has no router or proxy to send a request through (the workers' "
     "own health is the health layer's)"),
    (C.E2E_ANSWERS_REFERENCES_TAKEN, AnswerProbes("m", _OK, 0.41, 1, "5f0c1234abcdef"),
     "3 greedy probe(s) at C1 in 0.41 s: no structural failure, keys recalled; stored as "
     "references #1 (state 5f0c1234abcd)"),
    (C.E2E_ANSWERS_SAME, AnswerProbes("m", _OK, 0.4, 1, "5f0c1234abcdef"),
     "3 greedy probe(s) at C1 in 0.40 s: answers as references #1 (state 5f0c1234abcd)"),
    (C.E2E_ANSWERS_UNREFERENCED, AnswerProbes("m", _OK, 0.4),
     "3 greedy probe(s) at C1 in 0.40 s: no structural failure, keys recalled; no ledger, so no "
     "references"),
    (C.E2E_ANSWERS_CHANGED,
     AnswerProbes("m", _BAD, 0.42, 1, "5f0c1234abcdef", AnswerSite.KV_TRANSFER),
     "3 greedy probe(s) at C1 in 0.42 s: 3 of 3 wrong against references #1 (state "
     "5f0c1234abcd); localized to the KV hand-off: in every changed answer the prefill's first "
     "token agrees and the decode's differ from its first on (the decode continues from KV that "
     "is not the prompt's; see the pair layer for a layout the two sides disagree on); probe 0 "
     "(plain): differs from token 1: 'The stone river' (reference 'The garden window')"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "data", "sentence"), CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                                    enumerate(CASES)])  # fmt: skip
def test_each_code_reads_as_its_sentence(code: CheckCode, data: CheckData, sentence: str) -> None:
    assert check_detail(Check("decode", True, code, data)) == sentence
    stored = read_check_row(code.layer.value, "decode", True, code.value, encode(data))
    assert check_detail(stored) == sentence  # the ledger's record reads the same


def test_every_code_has_a_sentence_and_a_row_in_docs_verify_md() -> None:
    assert {code for code, _data, _sentence in CASES} == set(CheckCode)
    docs = (REPO / "docs" / "verify.md").read_text(encoding="utf-8")
    undocumented = [code.value for code in CheckCode if f"`{code.value}`" not in docs]
    assert not undocumented, f"codes missing from docs/verify.md: {undocumented}"
    assert all(re.fullmatch(r"(config|live|pair|health|e2e)\.[a-z_]+", code) for code in CheckCode)


def test_an_older_rows_sentence_and_an_unknown_code_still_read() -> None:
    older = UntypedCheck("live", "decode", False, "differs: file 1, live 2", {"knob": "K"})
    assert check_detail(older) == "differs: file 1, live 2"
    assert check_detail(UntypedCheck("live", "decode", False, None, {}, "live.someday")) == (
        "live.someday"
    )
    assert check_detail(UntypedCheck("live", "decode", False, None, {})) == ""


@pytest.mark.parametrize(
    ("before", "first", "second"),
    [((0,), 8.59, 0.09), ((3,), 0.1, None), (None, 17.9, 1.2), (None, 1.3, 1.2), (None, 1.0, None)],
)
def test_the_cold_or_warm_reason_agrees_with_the_rule(
    before: tuple[int, ...] | None, first: float, second: float | None
) -> None:
    """The e2e sentence says why the request was cold or warm as ``_classify`` decided it."""
    start = _classify(before, first, second, E2EOptions())
    data = _e2e(200, first, 0.01, before=before, start=start.start, start_reason=start.reason,
                second=None if second is None else _second(second))  # fmt: skip
    detail = check_detail(Check("router", True, C.E2E_PASSED, data))
    assert f"; {start.start} (" in detail and "no reason recorded" not in detail


def test_the_json_carries_the_code_and_the_reason() -> None:
    bad = Check("decode", False, C.LIVE_DIFFERS, _live(LiveVerdict.DIFFERS, "1", "2"))
    good = Check("router", True, C.HEALTH_READY, _PD)
    report = VerifyReport([good, bad], "h", _LAYERS, ["decode", "router"], 0.2, 9)
    doc = json.loads(verify_json(report))
    assert doc["checks"][1] == {
        **encode(bad, StoredCheck),
        "result": "fail",
        "detail": "differs: file 1, live 2 (restart needed)",
    }
    assert doc["checks"][0]["code"] == "health.ready" and doc["ok"] is False
    again = read_check(encode(bad, StoredCheck))
    assert with_details([encode(again, StoredCheck)])[0] == doc["checks"][1]
    assert with_details([encode(bad, StoredCheck), "x"]) == [doc["checks"][1], "x"]
    text = render_verify(report)
    assert "FAIL live decode: differs: file 1, live 2 (restart needed)" in text
    assert "recorded as verification #9" in text


def test_a_restart_shows_its_failed_checks_reasons() -> None:
    bad = Check("decode", False, C.LIVE_DIFFERS, _live(LiveVerdict.DIFFERS, "1", "2"))
    verification = VerifyReport([bad], "h", _LAYERS, ["decode"], 0.1)
    report = RestartReport(["decode", "router"], [], verification=verification)
    assert "live/decode: differs: file 1, live 2 (restart needed)" in render_restart(report)
    assert "FAILED (1 check(s))" in render_restart(report)
    (shown,) = json.loads(restart_json(report))["verification"]["checks"]
    assert (shown["code"], shown["detail"]) == ("live.differs", check_detail(bad))
    assert json.loads(restart_json(RestartReport(["decode"], [])))["verification"] is None
