"""``case bisect --resume`` from another deployment sharing the ledger (issue 38): refused (exit 2)
before anything is restarted, measured or written, naming the deployment the bisection was
started on and the spec to resume it with (its probes were measured there, its visits set its
change values there). Real processes and files: each spec's only service cannot start
(``exit 3``), so the bisection started in ``a/`` stops at its first visit (recorded, its knobs
put back as found) and a resume that got past the check fails its restart (exit 1). A
bisection recorded before it named its deployment is resumed only where each change's file
holds its bad value (``investigate --resume`` resumes a bisection through the same call)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.ledger.ledger import Ledger
from tests.support import run_cli
from tests.support.history import K
from tests.support.unstartable import unstartable_spec

K2 = "OTHER_KNOB"
TEST = ("--test", "throughput@C2<3000", "--runs", "1", "--requests", "4", "--warmup", "0",
        "--rounds", "1")  # fmt: skip


def _two_knob_spec(folder: Path, name: str, env: str) -> Path:
    spec = unstartable_spec(folder, name)
    spec.write_text(spec.read_text().replace(f'knobs = ["{K}"]', f'knobs = ["{K}", "{K2}"]'))
    (folder / "decode.env").write_text(env)
    return spec


def _started(tmp_path: Path) -> tuple[Path, Path, tuple[str, str], str]:
    """alpha's bisection of two changes (their bad values alpha's files hold), stopped at its
    first visit's failed restart; beta's file holds another value."""
    ledger_file = tmp_path / "shared" / "ledger.db"
    led = ("--ledger", str(ledger_file))
    alpha = _two_knob_spec(tmp_path / "a", "alpha", f"{K}=256\n{K2}=2\n")
    beta = _two_knob_spec(tmp_path / "b", "beta", f"{K}=128\n{K2}=2\n")
    cid = str(json.loads(run_cli("case", "open", "hang", "--json", *led).stdout)["id"])
    done = run_cli("case", "bisect", cid, "--change", f"decode:{K}=512,256", "--change",
                   f"decode:{K2}=1,2", *TEST, "-f", str(alpha), *led, timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert (tmp_path / "a" / "decode.env").read_text() == f"{K}=256\n{K2}=2\n"  # put back
    return alpha, beta, led, cid


def _changes(led: tuple[str, str]) -> int:
    with Ledger.open(Path(led[1])) as ledger:
        return len(ledger.list(KnobChangeRecord))


def _resumed(cid: str, spec: Path, led: tuple[str, str]) -> tuple[int, str]:
    done = run_cli("case", "bisect", cid, "--resume", "-f", str(spec), *led, timeout=300)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


@pytest.mark.timeout(300)
def test_bisect_resume_from_another_deployment_is_refused(tmp_path: Path) -> None:
    alpha, beta, led, cid = _started(tmp_path)
    before = _changes(led)
    code, said = _resumed(cid, beta, led)
    assert code == 2, said
    assert (
        f"case {cid}'s bisection" in said
        and "was started on alpha, not this deployment "
        f"(beta): its probes were measured there; resume it with -f {alpha}"
        in said
    )
    assert "Traceback" not in said and "visit" not in said
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n{K2}=2\n"  # never written
    assert not (tmp_path / "b" / "state" / "logs").exists()  # nothing restarted
    assert _changes(led) == before
    code, said = _resumed(cid, alpha, led)  # its own: past the check, its restart fails
    assert code == 1 and "visit 1/2" in said, said


@pytest.mark.timeout(300)
def test_a_bisection_recorded_before_it_named_its_deployment(tmp_path: Path) -> None:
    alpha, beta, led, cid = _started(tmp_path)
    with sqlite3.connect(led[1]) as conn:  # as an older servelab recorded it: no deployment
        (detail,) = conn.execute("SELECT detail FROM case_events WHERE kind = 'bisect'").fetchone()
        start = json.loads(detail)
        assert start.pop("deployment") == "alpha" and start.pop("spec") == str(alpha)
        del start["mark"]
        conn.execute("UPDATE case_events SET detail = ? WHERE kind = 'bisect'",
                     (json.dumps(start),))  # fmt: skip
    before = _changes(led)
    code, said = _resumed(cid, beta, led)
    assert code == 2, said
    assert (
        "was recorded before a bisection named its deployment, and this deployment's decode "
        f"{K} is 128, not its bad value 256" in said
    )
    assert (tmp_path / "b" / "decode.env").read_text() == f"{K}=128\n{K2}=2\n"
    assert _changes(led) == before
    code, said = _resumed(cid, alpha, led)  # alpha's files hold the bad values
    assert code == 1 and "visit 1/2" in said, said
