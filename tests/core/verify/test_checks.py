"""Typed checks: a code per outcome, a data type per kind, the flat JSON they always had, and the
rows older ledgers hold."""

from __future__ import annotations

from typing import Any

import pytest

from servelab.core.answers.answer import Failure
from servelab.core.answers.probes import ProbeKind
from servelab.core.answers.transfer import AnswerSite
from servelab.core.deploy.relaunch import SettingChange
from servelab.core.knobs.rules import LiveVerdict
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob
from servelab.core.ledger.codec import encode
from servelab.core.verify import checks
from servelab.core.verify.answers import AnswerProbes, ProbeOutcome
from servelab.core.verify.arguments import (
    ArgumentDropped,
    ArgumentInFile,
    ArgumentLive,
    ArgumentVerdict,
    Overridden,
    UnitState,
    argument_verdict,
)
from servelab.core.verify.checks import (
    DATA_OF,
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
from servelab.core.verify.e2e import E2EProbe, RequestTiming, WorkerReach
from servelab.core.verify.health import HealthProbe, StaleWorker, WorkerListing
from servelab.core.verify.pair import (
    FieldRule,
    FieldVerdict,
    PairFieldCheck,
    PairReport,
    PairValue,
)
from servelab.core.verify.record import StoredCheck, UntypedCheck, read_check, read_check_row

K = "SGLANG_SM120_MMA_TARGET_CTAS"
MRR = "--max-running-requests"
TIMING = RequestTiming(200, 0.02, 0.09, 16, 512, None)
LISTING = WorkerListing("decode", "http://127.0.0.1:1", "decode", True, True)

#: One datum of each kind, and the JSON keys it has always been written with (before the types).
SHAPES: list[tuple[CheckData, list[str]]] = [
    (ArgumentDropped("--enable-prefix-caching", "/e/d.yaml", "enable-prefix-caching: false"),
     ["knob", "path", "key"]),
    (PairReport("prefill", "decode", (PairFieldCheck(
        "page_size", FieldRule.EQUAL, PairValue(True, "64", "page_size", "cmdline"),
        PairValue(False), FieldVerdict.UNKNOWN),), decode_error="decode: no answer"),
     ["prefill", "decode", "fields", "decode_error"]),
    (UnreadKnob("VLLM_X", "vllm", "0.26.0", ReadVerdict.NOT_READ, "VLLM_Y", "envs.py"),
     ["knob", "engine", "version", "verdict", "suggestion", "source"]),
    (HealthProbe("/readiness", 200, 0.01, workers=(
        WorkerListing("prefill", "http://p", "prefill", True, True, None, 1, 2),),
        unknown=(StaleWorker("http://x", "decode", "w1", ("curl",)),)),
     ["path", "status", "elapsed_s", "workers", "unknown"]),
    (CheckFailure("HostError: x"), ["error"]),
    (NoEnvFile(True), ["knobs"]),
    (EnvFileFailure("/e/decode.env"), ["env_file", "error"]),
    (EnvFileNoKnobs("/e/decode.env"), ["env_file"]),
    (KnobInFile(K, "512", "512", None, None, "/e/d.env"),
     ["knob", "file", "spec", "backup", "backup_path", "env_file"]),
    (KnobInFile(K, "512", None, "256", "/b", "/e/d.env", recorded="384", recorded_change_id=7),
     ["knob", "file", "spec", "backup", "backup_path", "env_file", "recorded",
      "recorded_change_id"]),
    (LiveProcess(None, "no pid record, unit or listener"), ["pid", "pid_source"]),
    (KnobLive(42, "pid record", K, "512", None, LiveVerdict.RESTART_NEEDED),
     ["pid", "pid_source", "knob", "file", "live", "verdict"]),
    (KnobNotReadBack(42, "pid record", K, "512"), ["pid", "pid_source", "knob", "file"]),
    (KnobLiveVsSpec(42, "pid record", K, "512", "512"),
     ["pid", "pid_source", "knob", "live", "spec", "file"]),
    (RouterLaunch(42, (SettingChange("policy", "--policy", "cache_aware", "round_robin"),)),
     ["pid", "changes"]),
    (HealthProbe("/health", None, 0.001, error="refused"),
     ["path", "status", "elapsed_s", "error"]),
    (HealthProbe("/readiness", 503, 0.002, body="no workers"),
     ["path", "status", "elapsed_s", "body"]),
    (HealthProbe("/health", 200, 0.003), ["path", "status", "elapsed_s"]),
    (HealthProbe("/readiness", 200, 0.01, healthy_workers=2, total_workers=2, workers=(LISTING,),
                 missing=()),
     ["path", "status", "elapsed_s", "healthy_workers", "total_workers", "workers", "missing"]),
    (HealthProbe("/readiness", 200, 0.01, workers_error="RouterApiError: 404"),
     ["path", "status", "elapsed_s", "workers_error"]),
    (E2EProbe.of("m", RequestTiming(500, None, 0.1, 0, 512, "http 500", "boom"), None),
     ["model", "status", "ttft_s", "total_s", "completion_tokens", "prompt_tokens", "error",
      "error_detail", "decode_requests_before"]),
    (E2EProbe("m", 200, 8.5, 8.6, 16, 512, None, None, (0,), TIMING, Start.COLD,
              StartReason.FIRST_SINCE_START),
     ["model", "status", "ttft_s", "total_s", "completion_tokens", "prompt_tokens", "error",
      "decode_requests_before", "second", "start", "start_reason"]),
    (WorkerReach("decode", "router", 4, 5, 3, (200, None)),
     ["role", "via", "served_before", "served_after", "requests_sent", "statuses"]),
    (ArgumentInFile(MRR, "64", "args_env", "/e/d.env", None,
                    (Overridden("config_file", "32"),)),
     ["knob", "file", "place", "path", "spec", "overridden"]),
    (UnitState("sglang-decode.service", True), ["unit", "needs_reload"]),
    (ArgumentLive(42, "pid record", MRR, "64", "64", "cmdline", LiveVerdict.MATCH, True, "64",
                  "internal_states[0].effective_max_running_requests_per_dp"),
     ["pid", "pid_source", "knob", "file", "live", "live_source", "verdict", "engine_known",
      "engine", "engine_field"]),
    (ArgumentLive(42, "pid record", MRR, "64", "64", "cmdline", LiveVerdict.MATCH),
     ["pid", "pid_source", "knob", "file", "live", "live_source", "verdict", "engine_known"]),
    (LayerSkipped(SkipReason.NO_ENTRY_POINT), ["reason"]),
    (AnswerProbes("m", (ProbeOutcome(1, ProbeKind.TOOL, True, (Failure.TOOL_JSON,), None, 1, True,
                                     '{"a', '{"a": 1}'),), 0.2, 3, "abc", AnswerSite.KV_TRANSFER),
     ["model", "outcomes", "total_s", "references_id", "references_state", "site"]),
]  # fmt: skip


def test_public_api_is_exported() -> None:
    assert all(hasattr(checks, name) for name in checks.__all__)


def test_every_code_carries_one_kind_and_names_its_layer() -> None:
    assert set(DATA_OF) == set(CheckCode)
    assert {code.layer for code in CheckCode} == set(Layer)
    assert all(code.value.startswith(f"{code.layer.value}.") for code in CheckCode)
    assert {CheckCode.error_of(layer).value for layer in Layer} == {
        "config.error", "live.error", "pair.error", "health.error", "e2e.error"
    }  # fmt: skip
    assert [CheckCode.of_verdict(v).value for v in LiveVerdict] == [
        "live.match", "live.unset", "live.restart_needed", "live.lost_on_restart", "live.differs"
    ]  # fmt: skip
    assert [CheckCode.of_argument(ArgumentVerdict(v, False)).value for v in LiveVerdict] == [
        "live.argument_match", "live.argument_unset", "live.argument_restart_needed",
        "live.argument_lost_on_restart", "live.argument_differs",
    ]  # fmt: skip
    differs = ArgumentVerdict(LiveVerdict.MATCH, True)
    assert CheckCode.of_argument(differs) is CheckCode.LIVE_ENGINE_DIFFERS and not differs.ok
    assert {type(data) for data, _keys in SHAPES} == set(DATA_OF.values())


@pytest.mark.parametrize(("data", "keys"), SHAPES, ids=lambda d: type(d).__name__)
def test_each_kind_keeps_its_json_keys_and_reads_back(data: CheckData, keys: list[str]) -> None:
    code = next(code for code, kind in DATA_OF.items() if isinstance(data, kind))
    check = Check("decode", code is not CheckCode.LIVE_RESTART_NEEDED, code, data)
    flat = encode(check, StoredCheck)
    assert list(flat) == [*keys, "layer", "service", "ok", "code"]
    assert (flat["layer"], flat["code"]) == (code.layer.value, code.value)
    assert read_check(flat) == check
    assert read_check_row(code.layer.value, "decode", check.ok, code.value, encode(data)) == check


def test_a_check_names_its_knob_as_written_and_its_live_value() -> None:
    live = KnobLive(42, "pid record", K, "512", "512", LiveVerdict.MATCH)
    back = read_check_row("live", "decode", True, "live.match", encode(live))
    assert isinstance(back, Check) and back.data == live and encode(live)["knob"] == K
    assert (back.knob, back.live) == (K, "512")
    in_file = KnobInFile(K, "512", None, None, None, "/e/decode.env")
    assert Check("decode", True, CheckCode.CONFIG_NOT_PINNED, in_file).knob == K
    argument = KnobLiveVsSpec(42, "pid record", "--max-running-requests", "64", "64")
    vs_spec = Check("decode", True, CheckCode.LIVE_NO_ENV_FILE, argument)
    assert (vs_spec.knob, vs_spec.live) == ("--max-running-requests", "64")
    health = Check("decode", True, CheckCode.HEALTH_READY, HealthProbe("/health", 200, 0.1))
    assert (health.knob, health.live) == (None, None)


def test_a_check_refuses_data_of_another_kind() -> None:
    with pytest.raises(TypeError, match=r"live\.differs carries KnobLive, not HealthProbe"):
        Check("decode", False, CheckCode.LIVE_DIFFERS, HealthProbe("/health", 200, 0.1))


def test_a_row_written_before_the_types_reads_typed() -> None:
    """A check row as servelab stored it before its data was typed: the keys sorted, lists."""
    stored: dict[str, Any] = {
        "decode_requests_before": None, "completion_tokens": 16, "error": None, "model": "m",
        "prompt_tokens": 512, "second": {"completion_tokens": 16, "error": None,
        "prompt_tokens": 512, "status": 200, "total_s": 1.2, "ttft_s": 0.1},
        "start": "cold", "start_reason": "slower-than-second", "status": 200, "total_s": 17.9,
        "ttft_s": 17.8,
    }  # fmt: skip
    check = read_check_row("e2e", "router", True, "e2e.passed", stored)
    assert isinstance(check, Check) and isinstance(check.data, E2EProbe)
    assert check.data.second == RequestTiming(200, 0.1, 1.2, 16, 512, None)
    assert (check.data.start, check.data.start_reason) == (
        Start.COLD, StartReason.SLOWER_THAN_SECOND
    )  # fmt: skip
    reach = read_check_row("e2e", "decode-1", True, "e2e.worker_reached", {
        "requests_sent": 3, "role": "decode", "served_after": 5, "served_before": 4,
        "statuses": [200, 200, 200], "via": "router"})  # fmt: skip
    assert isinstance(reach, Check) and reach.data == WorkerReach(
        "decode", "router", 4, 5, 3, (200, 200, 200)
    )


def test_what_cannot_be_typed_reads_as_stored() -> None:
    sentence = read_check_row("live", "decode", False, "differs: file 1, live 2", {"knob": "K"})
    assert sentence == UntypedCheck(
        "live", "decode", False, "differs: file 1, live 2", {"knob": "K"}
    )
    assert (sentence.knob, sentence.live) == ("K", None)
    newer = read_check({"layer": "live", "service": "decode", "ok": False, "code": "live.someday"})
    assert newer == UntypedCheck("live", "decode", False, None, {}, "live.someday")
    misfit = read_check_row("live", "decode", False, "live.differs", {"knob": "K"})
    assert misfit == UntypedCheck("live", "decode", False, "live.differs", {"knob": "K"})
    assert encode(newer, StoredCheck) == {"layer": "live", "service": "decode", "ok": False,
                               "code": "live.someday", "detail": None}  # fmt: skip


@pytest.mark.parametrize(
    ("file", "live", "engine", "known", "verdict", "engine_differs"),
    [
        ("64", "64", "64", True, LiveVerdict.MATCH, False),
        ("64", "64", "64.0", True, LiveVerdict.MATCH, False),  # a resolved number
        ("64", "64", "128", True, LiveVerdict.MATCH, True),  # the engine names the stale layer
        ("64", "64", None, False, LiveVerdict.MATCH, False),  # unknown: shown, not compared
        ("64", "32", "32", True, LiveVerdict.DIFFERS, False),  # argv first: a restart is due
        (None, None, "128", True, LiveVerdict.UNSET, False),  # unset: the engine's default
        ("on", "on", "on", True, LiveVerdict.MATCH, False),
    ],
)
def test_the_argument_rule_names_the_layer_that_disagrees(
    file: str | None, live: str | None, engine: str | None, known: bool,
    verdict: LiveVerdict, engine_differs: bool,
) -> None:  # fmt: skip
    got = argument_verdict(file, live, engine, known)
    assert (got.verdict, got.engine_differs) == (verdict, engine_differs)
    assert got.ok == (verdict.ok and not engine_differs)
