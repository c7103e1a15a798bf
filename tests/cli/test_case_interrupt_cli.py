"""A stop signal (Ctrl-C, SIGTERM, SIGHUP) while ``case test`` or ``case revert`` co-restarts the
decode and the router, as real processes on a real simulated stack: the deployment is put back
as the command found it (the knob at its value, every service answering /health), and the
command says so; a second signal during that names exactly the services left down and the
command that brings them back (text and ``--json``), exit 128 + the first signal.

Each test waits for the co-restart to be under way (the decode's pid record holds a new launch:
the router is stopped, the decode starting), never for a time.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.knob import get_knob
from tests.support import run_cli
from tests.support.generic import text_or_empty
from tests.support.putbacks import (
    FOUND,
    TARGET,
    answers,
    as_found,
    ended,
    pd_stack,
    start,
    suspect_case,
)

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
#: A second declared knob (unset), changed in the bisection beside the first.
JIT = "SGLANG_ENABLE_JIT_DEEPGEMM"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "interrupt", knobs=(DEFAULT_KNOB, JIT))


def _relaunched(proc: subprocess.Popen[bytes], record: Path, before: str) -> str:
    """Wait until ``record`` (the decode's pid record) holds another launch than ``before``;
    the new text. Fails if the command ends first or it takes over two minutes."""
    deadline = time.monotonic() + 120
    while text_or_empty(record) in ("", before):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no co-restart seen: {proc.communicate(timeout=60)[1].decode()}")
        time.sleep(0.05)
    return text_or_empty(record)


def _stop(
    loaded: LoadedSpec, proc: subprocess.Popen[bytes], signums: list[int]
) -> tuple[int, str, str]:
    """Send ``signums[0]`` once the co-restart is under way, each next one once the decode is
    launched again (the put-back's co-restart); the exit code, stdout and stderr (one line)."""
    record = loaded.state_dir / "run" / "decode.json"
    seen = text_or_empty(record)
    try:
        for signum in signums:
            seen = _relaunched(proc, record, seen)
            proc.send_signal(signum)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        raise
    return ended(proc)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_stop_signal_during_a_case_test_co_restart_puts_the_deployment_back(
    stack: LoadedSpec, tmp_path: Path, signum: int
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    proc = start(stack, ledger_file, "case", "test", cid, TARGET, "--to", "128", "--test",
                 "answers@C4", "--rounds", "1", "--runs", "1", "--requests", "64")  # fmt: skip
    code, _out, err = _stop(stack, proc, [signum])
    assert code == 128 + signum, err
    assert "stopped; the deployment is as this command found it" in err
    assert "co-restarted decode, router" in err and "Traceback" not in err
    as_found(stack)


@pytest.mark.timeout(400)
def test_ctrl_c_during_a_case_revert_puts_the_knob_back_and_says_so_in_json(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    proc = start(stack, ledger_file, "case", "revert", cid, TARGET, "--to", "128", "--yes",
                 "--json")  # fmt: skip
    code, out, err = _stop(stack, proc, [signal.SIGINT])
    assert code == 130, err
    doc = json.loads(out)
    assert (doc["ok"], doc["exit_code"], doc["error"]) == (False, 130, "interrupted")
    assert (doc["down"], doc["recovery"]) == ([], None)
    put = doc["put_back"]
    assert put["ok"] is True and put["restarted"] == ["decode", "router"]
    assert put["written"] == [{"service": "decode", "knob": DEFAULT_KNOB, "value": FOUND}]
    assert f"wrote back decode {DEFAULT_KNOB}={FOUND}" in err
    as_found(stack)
    with Ledger.open(ledger_file) as ledger:  # both writes recorded: the revert, the put-back
        changes = [(c.old, c.new) for c in ledger.list(KnobChangeRecord)]
    assert changes == [(FOUND, "128"), ("128", FOUND)]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_second_signal_names_exactly_what_is_down_and_how_to_bring_it_back(
    stack: LoadedSpec, tmp_path: Path, as_json: bool
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    extra = ("--json",) if as_json else ()
    proc = start(stack, ledger_file, "case", "revert", cid, TARGET, "--to", "128", "--yes",
                 *extra)  # fmt: skip
    try:
        code, out, err = _stop(stack, proc, [signal.SIGTERM, signal.SIGINT])
        assert code == 143, err  # the first signal's
        down = [s for s in stack.spec.services if not answers(stack, s)]
        assert down and "decode" in down, err  # the put-back's co-restart was cut
        recovery = f"servelab up -f {stack.source}"
        assert "the deployment is NOT as this command found it" in err
        assert "a second signal stopped putting it back" in err
        assert f"down: {', '.join(down)}; bring them back with: {recovery}" in err
        if as_json:
            doc = json.loads(out)
            assert (doc["down"], doc["recovery"], doc["exit_code"]) == (down, recovery, 143)
            assert doc["put_back"]["interrupted"] is True and doc["put_back"]["ok"] is False
        # The knob was written back before the co-restart: the command said works.
        assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
    finally:
        assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    as_found(stack)


LOAD = ("--concurrency", "2", "--requests", "12", "--warmup", "2", "--output-len", "8",
        "--input-len", "32")  # fmt: skip


@pytest.mark.timeout(400)
@pytest.mark.parametrize(
    ("command", "signum"),
    [(("ab", "--repeat", "1"), signal.SIGINT), (("tune", "--max-rounds", "3"), signal.SIGTERM)],
    ids=["ab-SIGINT", "tune-SIGTERM"],
)
def test_a_stop_signal_during_an_arms_co_restart_puts_the_original_value_back(
    stack: LoadedSpec, tmp_path: Path, command: tuple[str, ...], signum: int
) -> None:
    ledger_file = tmp_path / "ledger.db"
    proc = start(stack, ledger_file, *command, "--knob", f"decode:{DEFAULT_KNOB}=256,128",
                 *LOAD)  # fmt: skip
    code, _out, err = _stop(stack, proc, [signum])
    assert code == 128 + signum, err
    assert "stopped; the deployment is as this command found it" in err
    assert f"wrote back decode {DEFAULT_KNOB}={FOUND}" in err and "Traceback" not in err
    as_found(stack)


@pytest.mark.timeout(400)
def test_ctrl_c_during_a_case_bisect_co_restart_puts_the_deployment_back(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    proc = start(stack, ledger_file, "case", "bisect", cid, "--change",
                 f"decode:{DEFAULT_KNOB}=128,{FOUND}", "--change", f"decode:{JIT}=1,",
                 "--test", "throughput@C2<1",
                 "--answers", "off", "--runs", "1", *LOAD[2:])  # fmt: skip
    code, _out, err = _stop(stack, proc, [signal.SIGINT])
    assert code == 130, err
    assert "stopped; the deployment is as this command found it" in err and "Traceback" not in err
    as_found(stack)
    assert asyncio.run(get_knob(stack, "decode", JIT)) is None
