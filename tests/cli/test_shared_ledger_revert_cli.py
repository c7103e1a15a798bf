"""Two deployments (two specs in two folders) sharing one ledger (issue 38): ``case revert`` of
one reads its own knob history only. The other's later change of a knob of the same service and
name is not "what servelab last wrote there", so it is no hand edit to refuse with ``--force``.
Real processes; the spec's only service cannot start (``exit 3``), so a revert that got as far
as its restart fails with exit 1 and shows it (``case test``, which refuses a deployment not up,
with a stranger answering its health: :func:`~tests.support.unstartable.answering`)."""

from __future__ import annotations

import json
from pathlib import Path

from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.history import K
from tests.support.unstartable import alpha_and_beta, answering, mark, same_named

TARGET = f"knob:decode/{K}"


def test_case_revert_reads_this_deployments_knob_history_only(tmp_path: Path) -> None:
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha, beta = alpha_and_beta(tmp_path)
    for spec, value in ((alpha, "512"), (beta, "128")):  # alpha's change, then beta's
        done = run_cli("knob", "set", "decode", f"{K}={value}", "-f", str(spec), *led)
        assert done.returncode == 0, done.stdout + done.stderr
    with Ledger.open(ledger_file) as ledger:
        changes = sorted(ledger.list(KnobChangeRecord, name=K), key=lambda c: c.id)
    assert [c.new for c in changes] == ["512", "128"]
    opened = run_cli("case", "open", "hang", "--json", *led)
    cid = str(json.loads(opened.stdout)["id"])
    assert (
        run_cli(
            "case", "suspect", cid, TARGET, "--reason", "latest", "-f", str(alpha), *led
        ).returncode
        == 0
    )
    done = run_cli("case", "revert", cid, TARGET, "--yes", "-f", str(alpha), *led)
    said = done.stdout + done.stderr
    assert f"change #{changes[1].id}" not in said and "--force" not in said, said
    assert done.returncode == 1, said  # past the check: its restart fails (exit 3)
    with Ledger.open(ledger_file) as ledger:
        after = sorted(ledger.list(KnobChangeRecord, name=K), key=lambda c: c.id)[2:]
    # the revert, then its put-back after the failed restart: both alpha's (its decode's mark)
    assert [(c.old, c.new, c.deployment) for c in after] == [
        ("512", "256", mark(alpha)),
        ("256", "512", mark(alpha)),
    ]
    assert mark(alpha).startswith("alpha/decode@local:")
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n"  # beta's never touched


def test_a_hand_edit_in_this_deployment_is_still_refused(tmp_path: Path) -> None:
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha, beta = alpha_and_beta(tmp_path)
    for spec, value in ((alpha, "512"), (beta, "128")):
        assert (
            run_cli("knob", "set", "decode", f"{K}={value}", "-f", str(spec), *led).returncode == 0
        )
    (tmp_path / "a" / "decode.env").write_text(f"{K}=300\n")  # by hand, after alpha's change
    opened = run_cli("case", "open", "hang", "--json", *led)
    cid = str(json.loads(opened.stdout)["id"])
    assert (
        run_cli(
            "case", "suspect", cid, TARGET, "--reason", "latest", "-f", str(alpha), *led
        ).returncode
        == 0
    )
    done = run_cli("case", "revert", cid, TARGET, "--yes", "--to", "256", "-f", str(alpha), *led)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not 512 as servelab last wrote it (change #1)" in done.stderr, done.stderr
    assert (tmp_path / "a" / "decode.env").read_text() == f"{K}=300\n"


def test_case_test_reads_this_deployments_knob_history_only(tmp_path: Path) -> None:
    """alpha set 512 (from 256), then beta set 128 and 512: the newest change that set alpha's
    current 512 is beta's, so a `case test` in alpha took beta's 128 as the revert arm."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha, beta = alpha_and_beta(tmp_path)
    for spec, value in ((alpha, "512"), (beta, "128"), (beta, "512")):
        done = run_cli("knob", "set", "decode", f"{K}={value}", "-f", str(spec), *led)
        assert done.returncode == 0, done.stdout + done.stderr
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    assert run_cli("case", "suspect", cid, TARGET, "--reason", "x", *led).returncode == 0
    with answering(alpha):  # up, for case test's check; its first arm's restart then fails
        done = run_cli("case", "test", cid, TARGET, "--test", "answers@C2", "--rounds", "1",
                       "--requests", "64", "-f", str(alpha), *led, timeout=300)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # its first visit's restart fails (exit 3)
    assert f"case test {TARGET}: 512 against 256," in said, said
    assert (tmp_path / "a" / "decode.env").read_text() == f"{K}=512\n"  # put back as found


def test_same_named_deployments_read_their_own_knob_history(tmp_path: Path) -> None:
    """c and d2, both named servelab (the default name) in two folders sharing the ledger: c set
    100 (from 512); d2's file was edited to 100 by hand. A revert in d2 reverted to c's old 512
    (d2 had no change of its own to revert) and a restore from c then restored d2's case."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    c, d2 = same_named(tmp_path)
    done = run_cli("knob", "set", "decode", f"{K}=100", "-f", str(c), *led)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "d2" / "decode.env").write_text(f"{K}=100\n")
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    done = run_cli("case", "suspect", cid, TARGET, "--reason", "x", "-f", str(d2), *led)
    assert done.returncode == 0, done.stderr
    done = run_cli("case", "revert", cid, TARGET, "--yes", "-f", str(d2), *led)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said  # refused before anything is written or restarted
    assert f"no recorded change of decode/{K} to revert; say the value with --to" in said, said
    assert (tmp_path / "d2" / "decode.env").read_text() == f"{K}=100\n"
    assert not (tmp_path / "d2" / "state" / "logs").exists()
    with Ledger.open(ledger_file) as ledger:
        rows = ledger.list(KnobChangeRecord, name=K)
    assert [(c.old, c.new, c.deployment) for c in rows] == [("512", "100", mark(c))]


def test_case_test_of_same_named_deployments_reads_this_ones_history(tmp_path: Path) -> None:
    """c set 100 (from 512), then d2 (same name) set 200 and 100: the newest change that set c's
    current 100 is d2's, so a `case test` in c took d2's 200 as the revert arm."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    c, d2 = same_named(tmp_path)
    for spec, value in ((c, "100"), (d2, "200"), (d2, "100")):
        done = run_cli("knob", "set", "decode", f"{K}={value}", "-f", str(spec), *led)
        assert done.returncode == 0, done.stdout + done.stderr
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    assert run_cli("case", "suspect", cid, TARGET, "--reason", "x", *led).returncode == 0
    with answering(c):  # up, for case test's check; its first arm's restart then fails
        done = run_cli("case", "test", cid, TARGET, "--test", "answers@C2", "--rounds", "1",
                       "--requests", "64", "-f", str(c), *led, timeout=300)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # its first visit's restart fails (exit 3)
    assert f"case test {TARGET}: 100 against 512," in said, said
    assert (tmp_path / "c" / "decode.env").read_text() == f"{K}=100\n"  # put back as found
    assert (tmp_path / "d2" / "decode.env").read_text() == f"{K}=100\n"  # never touched
