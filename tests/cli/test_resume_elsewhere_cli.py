"""``ab --resume``/``tune --resume`` from another deployment sharing the ledger (issue 38, H2/H3):
refused (exit 2) before anything is restarted, measured or written, naming the deployment the
run was started on and the spec to resume it with; the other deployment's file never gets the
run's original value. Real processes and files: each spec's only service cannot start
(``exit 3``), so the run started in ``a/`` stops at its first arm (journalled, interrupted,
``a``'s value put back); a resume while it is down is refused as a new run is (exit 2, nothing
restarted), and one that got past the checks (a stranger answering its health) fails its restart
(exit 1) and shows it. A run journalled before runs named their deployment is resumed only where
the knob's file holds its original value."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import free_ports, run_cli
from tests.support.history import K
from tests.support.unstartable import answering, unstartable_spec

LOAD = ("--concurrency", "2", "--requests", "4", "--warmup", "0", "--answers", "off",
        "--allow-unread")  # fmt: skip


def _started(kind: str, spec: Path, led: tuple[str, ...]) -> int:
    """Start a run in ``spec``'s deployment: it stops at its first arm's failed restart."""
    extra = ("--repeat", "2", "--keep", "baseline") if kind == "ab" else ()
    with answering(spec):
        done = run_cli(kind, "--knob", f"decode:{K}=256,512", *LOAD, *extra, "-f", str(spec),
                       *led, timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    with Ledger.open(Path(led[1])) as ledger:
        table = "ab_sessions" if kind == "ab" else "tune_runs"
        with ledger._read() as conn:
            (run_id,) = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
    assert (spec.parent / "decode.env").read_text() == f"{K}=256\n"  # put back
    return int(run_id)


def _changes(ledger_file: Path) -> int:
    with Ledger.open(ledger_file) as ledger:
        return len(ledger.list(KnobChangeRecord, name=K))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["ab", "tune"])
def test_resume_from_another_deployment_is_refused(tmp_path: Path, kind: str) -> None:
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha = unstartable_spec(tmp_path / "a", "dep-a", "256")
    beta = unstartable_spec(tmp_path / "b", "dep-b", "512")
    run_id = _started(kind, alpha, led)
    before = _changes(ledger_file)
    done = run_cli(kind, "--resume", str(run_id), "-f", str(beta), *led, timeout=300)
    said = " ".join((done.stdout + done.stderr).split())
    what = "A/B" if kind == "ab" else "tune"
    assert done.returncode == 2, said
    assert f"{what} {run_id} was dep-a's (spec {alpha}); resume it with -f {alpha}" in said
    assert "resuming" not in said and "Traceback" not in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=512\n"  # never written
    assert _changes(ledger_file) == before  # nothing set in either deployment
    # its own deployment, down, refuses to resume as a new run does: nothing restarted first
    down = run_cli(kind, "--resume", str(run_id), "-f", str(alpha), *led, timeout=300)
    said = " ".join((down.stdout + down.stderr).split())
    assert down.returncode == 2, said
    assert f"{kind} --resume needs every service ready and refuses before starting" in said
    assert "resuming" not in said and _changes(ledger_file) == before
    # up, its own deployment resumes it: past the check, its restart fails as the first one did
    with answering(alpha):
        again = run_cli(kind, "--resume", str(run_id), "-f", str(alpha), *led, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    assert re.search(rf"resuming {what} {run_id}: \d+ visit\(s\) kept", again.stderr)
    assert (tmp_path / "a" / "decode.env").read_text() == f"{K}=256\n"


@pytest.mark.timeout(300)
def test_a_copy_of_the_spec_on_another_port_is_another_deployment(tmp_path: Path) -> None:
    """Two specs of one name (a copy on other ports) are told apart by the service's address."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    port_a, port_b = free_ports(2)
    alpha = unstartable_spec(tmp_path / "a", "dep", "256", port_a)
    copy = unstartable_spec(tmp_path / "b", "dep", "512", port_b)
    run_id = _started("ab", alpha, led)
    done = run_cli("ab", "--resume", str(run_id), "-f", str(copy), *led, timeout=300)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert f"A/B {run_id} was dep@local:{port_a}'s (spec {alpha})" in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=512\n"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["ab", "tune"])
def test_a_run_journalled_before_runs_named_their_deployment(tmp_path: Path, kind: str) -> None:
    """Without its owner (an older servelab's run), the run resumes only where the knob's file
    holds its original value: from dep-b (512, not 256) refused; from dep-a past the check."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha = unstartable_spec(tmp_path / "a", "dep-a", "256")
    beta = unstartable_spec(tmp_path / "b", "dep-b", "512")
    run_id = _started(kind, alpha, led)
    with sqlite3.connect(ledger_file) as conn:
        conn.execute("DROP TABLE journal_owners")  # as an older servelab left it
    what = "A/B" if kind == "ab" else "tune"
    done = run_cli(kind, "--resume", str(run_id), "-f", str(beta), *led, timeout=300)
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert (
        f"{what} {run_id} was recorded before a run named its deployment, and this deployment's "
        f"decode {K} is 512, not its original 256"
    ) in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=512\n"
    with answering(alpha):
        again = run_cli(kind, "--resume", str(run_id), "-f", str(alpha), *led, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"resuming {what} {run_id}" in again.stderr
