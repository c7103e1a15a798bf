"""Layered verification against a real stack: sim workers + the real sglang-router, free ports.

The env files the spec names hold what the workers were started with (plus a secret that must
never surface); the tests then edit them without a restart, restart, and kill the decode.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import Check, CheckCode, Layer, LiveProcess
from servelab.core.verify.contract import VerifyReport
from servelab.core.verify.e2e import E2EProbe, RequestTiming
from servelab.core.verify.record import StoredCheck, VerificationRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.verify.e2e import E2EOptions, _classify
from servelab.ops.verify.verify import LAYERS, verify
from servelab.report.verify import check_detail, render_verify, verify_json, with_details
from tests.support.specs import SECRET, PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack

FLAG = "SERVELAB_TEST_FLAG"
SCALE = "0.05"


def _env_text(knob: str | None, *, flag: str | None = None) -> str:
    lines = ["# decode env", f"SERVELAB_SIM_TIME_SCALE={SCALE}", f"SECRET_TOKEN={SECRET}"]
    if knob is not None:
        lines.append(f"{DEFAULT_KNOB}={knob}")
    if flag is not None:
        lines.append(f"{FLAG}={flag}")
    return "\n".join(lines) + "\n"


def _decode_env(knob: str) -> dict[str, str]:
    return {DEFAULT_KNOB: knob, "SECRET_TOKEN": SECRET}


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(time_scale=float(SCALE), decode_env=_decode_env("512"))
    try:
        yield st
    finally:
        st.stop()


def _toml(
    stack: SimStack,
    knobs: Sequence[str] | Mapping[str, str] = (DEFAULT_KNOB, FLAG),
    host: str | None = None,
    hosts_toml: str = "",
) -> str:
    """The spec of the module's stack (its decode declares the reference knob and the flag)."""
    ports = PdPorts.of(stack)
    return pd_spec_toml(ports, name="verify-test", knobs=knobs, host=host, hosts_toml=hosts_toml)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory, stack: SimStack) -> Path:
    root = tmp_path_factory.mktemp("verify")
    PdEnv(time_scale=float(SCALE)).write(root / "env")
    (root / "servelab.toml").write_text(_toml(stack))
    (root / "env" / "decode.env").write_text(_env_text("512"))
    return root


@pytest.fixture
def loaded(workdir: Path) -> LoadedSpec:
    (workdir / "env" / "decode.env").write_text(_env_text("512"))
    return load_spec(workdir / "servelab.toml")


def _rewrite_decode_env(loaded: LoadedSpec, text: str) -> Path:
    """Edit the decode's env file behind the running decode's back."""
    env_file = loaded.env_file("decode")
    assert env_file is not None
    env_file.write_text(text)
    return env_file


def _by(report: VerifyReport, layer: str, service: str, knob: str | None = None) -> Check:
    for check in report.layer(layer):
        if check.service == service and (knob is None or check.knob == knob):
            return check
    raise AssertionError(f"no {layer}/{service}/{knob} check in {encode(report)}")


def _assert_no_secret(report: VerifyReport, ledger_dir: Path | None = None) -> None:
    assert SECRET not in json.dumps(encode(report))
    assert SECRET not in render_verify(report)
    for path in ledger_dir.glob("ledger.db*") if ledger_dir else []:
        assert SECRET.encode() not in path.read_bytes(), path


async def test_every_layer_passes_and_is_recorded(loaded: LoadedSpec, tmp_path: Path) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = await verify(loaded, ledger=ledger)
        stored = ledger.get(VerificationRecord, report.verification_id or -1)
    assert report.ok, render_verify(report)
    assert {c.layer for c in report.checks} == set(LAYERS)
    assert check_detail(_by(report, "live", "decode", DEFAULT_KNOB)) == "live 512 = file"
    assert _by(report, "live", "decode", DEFAULT_KNOB).data.pid_source.startswith("owner of")
    assert "/readiness" in check_detail(_by(report, "health", "router"))
    assert "never exercises the KV transfer" in check_detail(_by(report, "health", "decode"))
    assert _by(report, "live", "decode", DEFAULT_KNOB).code == CheckCode.LIVE_MATCH
    assert _by(report, "health", "decode").code == CheckCode.HEALTH_WORKER_READY
    e2e = _by(report, "e2e", "router")
    assert isinstance(e2e.data, E2EProbe)
    assert e2e.data.status == 200 and e2e.data.completion_tokens == 16
    assert e2e.data.prompt_tokens >= 256  # long enough for a real KV transfer
    assert e2e.data.start in ("cold", "warm")
    assert stored is not None and stored.ok and len(stored.checks) == len(report.checks)
    doc = json.loads(verify_json(report))
    assert doc["ok"] is True
    assert set(doc["checks"][0]) >= {"layer", "service", "ok", "code", "detail"}
    assert [c["detail"] for c in doc["checks"]] == [check_detail(c) for c in report.checks]
    assert [c.code for c in stored.checks] == [c.code for c in report.checks]
    assert [check_detail(c) for c in stored.checks] == [check_detail(c) for c in report.checks]
    _assert_no_secret(report, tmp_path)


async def test_file_edit_without_restart_fails_live_layer(
    loaded: LoadedSpec, stack: SimStack
) -> None:
    env_file = _rewrite_decode_env(loaded, _env_text("256", flag="1"))
    report = await verify(loaded, ["decode"], layers=("config", "live"))
    assert not report.ok
    flag = _by(report, "live", "decode", FLAG)
    assert not flag.ok and check_detail(flag).startswith("in file but not live: restart needed")
    knob = _by(report, "live", "decode", DEFAULT_KNOB)
    assert not knob.ok and check_detail(knob) == "differs: file 256, live 512 (restart needed)"
    assert (flag.code, knob.code) == (CheckCode.LIVE_RESTART_NEEDED, CheckCode.LIVE_DIFFERS)
    assert _by(report, "config", "decode", DEFAULT_KNOB).ok  # the file itself is fine
    assert {c.service for c in report.checks} == {"decode"}

    env_file.write_text(_env_text(None))
    report = await verify(loaded, ["decode"], layers=("live",))
    lost = _by(report, "live", "decode", DEFAULT_KNOB)
    assert check_detail(lost).startswith("live but not in file: lost on next restart")
    assert lost.code == CheckCode.LIVE_LOST_ON_RESTART
    _assert_no_secret(report)


async def test_pinned_knob_mismatch_fails_config(workdir: Path, stack: SimStack) -> None:
    (workdir / "pinned.toml").write_text(_toml(stack, knobs={DEFAULT_KNOB: "256"}))
    loaded = load_spec(workdir / "pinned.toml")
    (workdir / "env" / "decode.env").write_text(_env_text("512"))
    report = await verify(loaded, ["decode"], layers=("config",))
    check = _by(report, "config", "decode", DEFAULT_KNOB)
    assert not check.ok and check_detail(check) == "file 512, spec pins 256"
    assert check.code == CheckCode.CONFIG_PIN_MISMATCH


async def test_restart_makes_file_live_and_first_request_is_cold(
    loaded: LoadedSpec, stack: SimStack
) -> None:
    _rewrite_decode_env(loaded, _env_text("256", flag="1"))
    stack.restart_workers(decode_env={**_decode_env("256"), FLAG: "1"})
    first = await verify(loaded)
    assert first.ok, render_verify(first)
    assert check_detail(_by(first, "live", "decode", FLAG)) == "live 1 = file"
    cold = _by(first, "e2e", "router")
    assert isinstance(cold.data, E2EProbe)
    assert cold.data.start == "cold" and cold.data.second is not None
    assert cold.data.start_reason == "first-since-start"
    assert cold.data.total_s > cold.data.second.total_s
    second = await verify(loaded, layers=("e2e",))
    warm = _by(second, "e2e", "router")
    assert isinstance(warm.data, E2EProbe)
    assert warm.data.start == "warm" and warm.data.second is None
    assert warm.data.start_reason == "served-before"
    assert "request(s) before" in check_detail(warm)


async def test_killed_decode_fails_health_and_e2e_with_reasons(
    loaded: LoadedSpec, stack: SimStack
) -> None:
    stack.stop_workers()
    try:
        report = await verify(loaded, e2e=E2EOptions(timeout_s=30))
    finally:
        stack.restart_workers(decode_env=_decode_env("512"))
    assert not report.ok
    health = _by(report, "health", "decode")
    assert not health.ok and "/health: unreachable" in check_detail(health)
    e2e = _by(report, "e2e", "router")
    assert not e2e.ok and check_detail(e2e).startswith("chat completion failed")
    assert (health.code, e2e.code) == (CheckCode.HEALTH_UNREACHABLE, CheckCode.E2E_FAILED)
    assert _by(report, "live", "decode").code == CheckCode.LIVE_NO_PROCESS
    assert not _by(report, "live", "decode").ok
    assert "no running process" in check_detail(_by(report, "live", "decode"))


async def test_unknown_service_and_layer_are_refused(loaded: LoadedSpec) -> None:
    from servelab.errors import SpecError

    with pytest.raises(SpecError, match="unknown service"):
        await verify(loaded, ["nope"])
    with pytest.raises(ValueError, match="unknown layer"):
        await verify(loaded, layers=("bogus",))


def test_check_json_shape() -> None:
    check = Check("decode", False, CheckCode.LIVE_FILE_UNREADABLE, LiveProcess(3, "pid record"))
    assert encode(check, StoredCheck) == {
        "layer": "live", "service": "decode", "ok": False, "code": "live.env_file_unreadable",
        "pid": 3, "pid_source": "pid record",
    }  # fmt: skip
    assert with_details([encode(check, StoredCheck)])[0] == {
        **encode(check, StoredCheck),
        "result": "fail",
        "detail": "pid 3: env file unreadable",
    }
    report = VerifyReport([check], "abc", tuple(Layer), ["decode"], 0.1)
    assert encode(report)["ok"] is False and report.failures == [check]
    assert VerifyReport([], "abc", tuple(Layer), [], 0.0).ok


async def test_every_layer_over_ssh(
    workdir: Path, stack: SimStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same stack seen through a real sshd: files, environ, pids and HTTP all go over SSH."""
    from tests.support.sshd import start_sshd

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        remote = _toml(stack, host="remote", hosts_toml=server.host_toml("remote"))
        (workdir / "remote.toml").write_text(remote)
        loaded = load_spec(workdir / "remote.toml")
        (workdir / "env" / "decode.env").write_text(_env_text("512", flag="1"))
        report = await verify(loaded, e2e=E2EOptions(timeout_s=30))
        assert {c.layer for c in report.checks} == set(LAYERS)
        flag = _by(report, "live", "decode", FLAG)
        assert not flag.ok and check_detail(flag).startswith("in file but not live: restart needed")
        assert check_detail(_by(report, "live", "decode", DEFAULT_KNOB)) == "live 512 = file"
        assert all(c.ok for c in report.checks if c is not flag), render_verify(report)
        _assert_no_secret(report)
    finally:
        server.stop()


async def test_without_env_file_live_is_compared_with_the_spec(
    workdir: Path, stack: SimStack
) -> None:
    pinned = _toml(stack, knobs={DEFAULT_KNOB: "512", FLAG: "1"})
    (workdir / "no-env.toml").write_text(pinned.replace('env_file = "env/decode.env"\n', ""))
    report = await verify(load_spec(workdir / "no-env.toml"), ["decode"], layers=("config", "live"))
    assert check_detail(_by(report, "live", "decode", DEFAULT_KNOB)) == (
        "live 512, spec pins 512; no env file to compare"
    )
    flag = _by(report, "live", "decode", FLAG)
    assert not flag.ok and check_detail(flag).startswith("live (unset), spec pins 1")
    config = _by(report, "config", "decode")
    assert config.ok and "compared live against the spec only" in check_detail(config)


async def test_config_flags_a_file_edited_outside_servelab(
    loaded: LoadedSpec, tmp_path: Path
) -> None:
    from servelab.ops.knob import set_knob

    with Ledger.open(tmp_path / "ledger.db") as ledger:
        change = await set_knob(loaded, "decode", DEFAULT_KNOB, "256", ledger=ledger)
        clean = await verify(loaded, ["decode"], layers=("config",), ledger=ledger)
        env_file = loaded.env_file("decode")
        assert env_file is not None
        env_file.write_text(env_file.read_text().replace("=256", "=128"))
        edited = await verify(loaded, ["decode"], layers=("config",), ledger=ledger)
    check = _by(clean, "config", "decode", DEFAULT_KNOB)
    assert check.ok and check_detail(check) == "file 256; changed since backup: 512 -> 256"
    assert check.data.recorded_change_id == change.change_id
    note = check_detail(_by(edited, "config", "decode", DEFAULT_KNOB))
    assert f"the last recorded change (#{change.change_id}) set 256" in note
    assert "edited outside servelab?" in note


def test_cold_or_warm_without_the_sim_counter_compares_two_probes() -> None:
    opts = E2EOptions()
    assert _classify(None, 17.9, 1.2, opts).start == "cold"
    assert _classify(None, 1.3, 1.2, opts).start == "warm"
    assert _classify(None, 0.3, 0.05, opts).start == "warm"  # < 0.5 s
    assert _classify(None, 1.0, None, opts).start == "unknown"
    assert _classify((0,), 0.1, None, opts).start == "cold"
    assert _classify((3,), 9.0, None, opts).start == "warm"


def test_the_e2e_detail_renders_each_cold_warm_reason() -> None:
    """The detail's "(why)" is the rule's reason code rendered (the sentences docs/verify shows)."""
    opts = E2EOptions()

    def reason(before: tuple[int, ...] | None, first: float, second: float | None) -> str:
        start = _classify(before, first, second, opts)
        timing = RequestTiming(200, 0.01, first, 16, 512, None)
        probe = E2EProbe.of("m", timing, before)
        probe = replace(probe, start=start.start, start_reason=start.reason, second=None
                        if second is None else replace(timing, total_s=second))  # fmt: skip
        detail = check_detail(Check("router", True, CheckCode.E2E_PASSED, probe))
        why = detail.split(f"; {start.start} (", 1)[1]  # "WHY)" or "WHY); second probe N s"
        return why.split("); second probe", 1)[0].removesuffix(")")

    why = [
        reason((0,), 8.6, 0.09),
        reason((2,), 0.09, None),
        reason(None, 4.61, 0.1),
        reason(None, 0.1, 0.1),
        reason(None, 1.0, None),
    ]
    assert why == [
        "first request since the decode started",
        "decode served 2 request(s) before",
        "46.1x slower than an immediate second probe",
        "an immediate second probe took 0.10 s",
        "no second probe to compare with",
    ]
