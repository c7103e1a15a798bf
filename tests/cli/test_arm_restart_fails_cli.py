"""An arm whose restart fails (issue 38, the eleventh pass): ``ab`` and ``tune`` put the knob
back as they found it with the shared put-back, and when the deployment is still down after
that, the failure is ``RestartLeftDown`` naming the services left down and the command that
brings them back (text and ``--json``), as ``restart``'s own; that command brings them back.

Real processes on a real simulated stack. The decode's port is taken by the test between the
stop and the start of the arm's co-restart (the decode's pid record gone: it was stopped; the
new decode binds only after its interpreter has started) and held until the command ends, so
the put-back's co-restart fails too; a second test frees it once the arm's restart has failed,
so the put-back brings the deployment back.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.armfailure import REASON
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

LOAD = ("--concurrency", "2", "--requests", "12", "--warmup", "2", "--output-len", "8",
        "--input-len", "32", "--answers", "off")  # fmt: skip
COMMANDS = {
    "ab": ("ab", "--repeat", "1", *LOAD),
    "tune": ("tune", "--max-rounds", "3", *LOAD[:-2]),
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "armfails")


def _start(loaded: LoadedSpec, ledger_file: Path, *args: str) -> subprocess.Popen[bytes]:
    return start(loaded, ledger_file, *args, "--knob", f"decode:{DEFAULT_KNOB}=256,128")


def _take_port(loaded: LoadedSpec, proc: subprocess.Popen[bytes]) -> socket.socket:
    """Bind and listen on the decode's port once the arm's co-restart has stopped the decode
    (its pid record gone), before the new decode binds it. Fails after two minutes, if the
    command ends first, or if the new decode got the port first (a record written again)."""
    record = loaded.state_dir / "run" / "decode.json"
    port = urlsplit(loaded.spec.services["decode"].url).port
    assert port is not None
    deadline = time.monotonic() + 120
    while text_or_empty(record) != "":
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no co-restart seen: {proc.communicate(timeout=60)[1].decode()}")
        time.sleep(0.01)
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    while True:
        try:
            holder.bind(("127.0.0.1", port))
            break
        except OSError:
            if text_or_empty(record) != "" or time.monotonic() > deadline:
                holder.close()
                pytest.fail("the new decode bound its port before the test could")
            time.sleep(0.01)
    holder.listen(1)
    return holder


@pytest.mark.timeout(400)
@pytest.mark.parametrize("command", ["ab", "tune"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_arm_whose_restart_fails_puts_back_and_names_what_is_left_down(
    stack: LoadedSpec, tmp_path: Path, command: str, as_json: bool
) -> None:
    extra = ("--json",) if as_json else ()
    proc = _start(stack, tmp_path / "ledger.db", *COMMANDS[command], *extra)
    holder = _take_port(stack, proc)
    try:
        code, out, err = ended(proc)
        down = [s for s in stack.spec.services if not answers(stack, s)]
    finally:
        holder.close()
    recovery = f"servelab up -f {stack.source}"
    try:
        assert code == 1, err
        assert down == ["decode", "router"], err
        assert "Traceback" not in err and ("arm 256" in err or "arm 128" in err), err
        assert f"down: decode, router; bring them back with: {recovery}" in err
        assert f"putting decode {DEFAULT_KNOB}={FOUND} back as found" in err
        if as_json:
            doc = json.loads(out)
            assert (doc["ok"], doc["error_type"], doc["exit_code"]) == (False, "RestartLeftDown", 1)
            assert (doc["down"], doc["recovery"]) == (down, recovery)
            assert doc["report"]["down"] == down
        # The knob was written back before the put-back's co-restart: the recovery is all.
        assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
        with Ledger.open(tmp_path / "ledger.db") as ledger:
            changes = [(c.old, c.new, c.reason) for c in ledger.list(KnobChangeRecord)]
        assert changes[0][0] == FOUND and changes[-1][1:] == (FOUND, REASON), changes
    finally:
        assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    as_found(stack)


def _restart_failed(ledger_file: Path, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the ledger holds a restart that left services down (the arm's)."""
    deadline = time.monotonic() + 120
    query = ("SELECT count(*) FROM deployments WHERE action = 'restart'"
             " AND json_extract(detail, '$.ok') = 0")  # fmt: skip
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no failed restart seen: {proc.communicate(timeout=60)[1].decode()}")
        try:
            with sqlite3.connect(f"file:{ledger_file}?mode=ro", uri=True, timeout=1) as db:
                if db.execute(query).fetchone()[0]:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.02)


@pytest.mark.timeout(400)
def test_a_port_freed_after_the_arms_restart_failed_is_put_back_up(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    proc = _start(stack, ledger_file, *COMMANDS["ab"], "--json")
    holder = _take_port(stack, proc)
    try:
        _restart_failed(ledger_file, proc)
    finally:
        holder.close()
    code, out, err = ended(proc)
    assert code == 1, err
    doc = json.loads(out)
    assert (doc["error_type"], "down" in doc) == ("BenchError", False), doc
    assert "restart for arm 256 failed (decode): arm not measured" in err
    assert "putting decode" in err and "Traceback" not in err
    as_found(stack)


@pytest.mark.timeout(400)
def test_a_case_tests_arm_whose_restart_fails_names_what_is_left_down(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    ledger_file = tmp_path / "ledger.db"
    cid = suspect_case(ledger_file)
    proc = start(stack, ledger_file, "case", "test", cid, TARGET, "--to", "128", "--test",
                 "answers@C4", "--rounds", "1", "--runs", "1", "--requests", "64",
                 "--json")  # fmt: skip
    holder = _take_port(stack, proc)
    try:
        code, out, err = ended(proc)
        down = [s for s in stack.spec.services if not answers(stack, s)]
    finally:
        holder.close()
    recovery = f"servelab up -f {stack.source}"
    try:
        assert (code, down) == (1, ["decode", "router"]), err
        doc = json.loads(out)
        assert (doc["error_type"], doc["down"], doc["recovery"]) == ("RestartLeftDown", down,
                                                                     recovery)  # fmt: skip
        assert f"down: decode, router; bring them back with: {recovery}" in err
        assert asyncio.run(get_knob(stack, "decode", DEFAULT_KNOB)) == FOUND
    finally:
        assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    as_found(stack)


def _putting_back(ledger_file: Path, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the ledger holds the put-back's write of the knob (the put-back under way)."""
    deadline = time.monotonic() + 120
    query = "SELECT count(*) FROM knob_changes WHERE reason = ?"
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no put-back seen: {proc.communicate(timeout=60)[1].decode()}")
        try:
            with sqlite3.connect(f"file:{ledger_file}?mode=ro", uri=True, timeout=1) as db:
                if db.execute(query, (REASON,)).fetchone()[0]:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.02)


@pytest.mark.timeout(400)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_one_ctrl_c_during_the_arm_failure_put_back_lets_it_finish_and_says_so(
    stack: LoadedSpec, tmp_path: Path, as_json: bool
) -> None:
    # issue 38 (thirteenth pass): one Ctrl-C there aborted the put-back (exit 1, down named).
    ledger_file = tmp_path / "ledger.db"
    extra = ("--json",) if as_json else ()
    proc = _start(stack, ledger_file, *COMMANDS["ab"], *extra)
    holder = _take_port(stack, proc)
    try:
        _restart_failed(ledger_file, proc)
    finally:
        holder.close()
    _putting_back(ledger_file, proc)
    proc.send_signal(signal.SIGINT)
    code, out, err = ended(proc)
    try:
        assert code == 130, err
        assert "failed: restart for arm 256 failed (decode): arm not measured" in err, err
        assert "stopped; the deployment is as this command found it" in err, err
        assert f"wrote back decode {DEFAULT_KNOB}={FOUND}" in err and "Traceback" not in err
        if as_json:
            doc = json.loads(out)
            assert (doc["exit_code"], doc["error"], doc["down"]) == (130, "interrupted", [])
            put = doc["put_back"]
            assert put["ok"] is True and put["interrupted"] is False, put
            assert put["failure"].startswith("restart for arm 256 failed (decode)"), put
    finally:
        if not all(answers(stack, s) for s in stack.spec.services):
            assert run_cli("up", "-f", stack.source, timeout=300).returncode == 0
    as_found(stack)
