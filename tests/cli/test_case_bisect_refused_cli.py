"""``servelab case bisect`` refused or recorded without a secret (issue 38, finding 1).

No stack runs: a case with a failing soak in a seeded ledger, a spec whose decode env file holds an
undeclared ``SECRET_TOKEN`` and declares ``SERVELAB_API_TOKEN`` as a knob.

1. A change of an undeclared knob (the secret one, or a name nowhere) is refused (exit 2) before
   anything is recorded: the case's events are the same before and after.
2. A bisection of the declared secret-named knob records its start with the change's values
   masked: ``case show`` (text and ``--json``) and ``ledger export`` never carry them, and it is
   not resumed (its values were not recorded). The
   bisection is stopped as it starts (its progress callback raises once the start is recorded).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from servelab.core.case.bisect import Change, ProbeOutcome
from servelab.core.case.bisectevents import BisectPlanned
from servelab.core.case.probe import BisectRecord, ProbeRecord, parse_probe_test
from servelab.core.case.record import CaseEvent
from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.ledger.codec import encode
from servelab.core.progress import ProgressEvent
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.io.specfile import load_spec
from servelab.ops.case import case as cases
from servelab.ops.case.bisect import BisectConfig, run_bisect
from tests.support import run_cli
from tests.support.casecli import cli_json
from tests.support.soakresult import failed_soak
from tests.support.specs import write_pd_spec

TOKEN = "SERVELAB_API_TOKEN"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, str]:
    spec = write_pd_spec(
        tmp_path / "s", name="refused", knobs=(DEFAULT_KNOB, TOKEN),
        decode_env=f"SECRET_TOKEN=hunter2\n{TOKEN}=hunter2\n",
    )  # fmt: skip
    ledger = tmp_path / "l" / "ledger.db"
    ledger.parent.mkdir()
    with Ledger.open(ledger) as led:
        cid = cases.open_case(led, "sessions hang")
        led.record_soak(failed_soak({}), case_id=cid)
    return spec, ledger, str(cid)


def _events(ledger: Path, cid: str) -> list[Any]:
    return cli_json("case", "show", cid, "--ledger", str(ledger))["events"]


@pytest.mark.parametrize("change", ["decode:SECRET_TOKEN=hunter2,hunter3", "decode:NOPE=1,2"])
def test_a_refused_bisection_records_nothing(setup: tuple[Path, Path, str], change: str) -> None:
    spec, ledger, cid = setup
    before = _events(ledger, cid)
    done = run_cli("case", "bisect", cid, "--change", change, "--test", "soak", "-f", str(spec),
                   "--ledger", str(ledger))  # fmt: skip
    assert done.returncode == 2, done.stderr + done.stdout
    assert "is not a declared knob of 'decode'" in done.stderr
    assert _events(ledger, cid) == before
    assert "hunter" not in done.stderr + done.stdout


class _Stop(Exception):
    """Raised by the progress callback once the bisection's start is recorded."""


def _stop_when_planned(event: ProgressEvent) -> None:
    if isinstance(event, BisectPlanned):
        raise _Stop


def test_a_secret_knobs_change_is_recorded_masked(setup: tuple[Path, Path, str]) -> None:
    spec, ledger, cid = setup
    cfg = BisectConfig(int(cid), parse_probe_test("soak"),
                       changes=(Change("decode", TOKEN, "hunter2", "hunter3"),))  # fmt: skip
    with Ledger.open(ledger) as led, pytest.raises(_Stop):
        asyncio.run(run_bisect(load_spec(spec), led, cfg, progress=_stop_when_planned))
    doc = cli_json("case", "show", cid, "--ledger", str(ledger))
    started = [e for e in doc["events"] if e["kind"] == "bisect"]
    assert len(started) == 1
    assert started[0]["detail"]["changes"][0]["knob"] == TOKEN
    assert {started[0]["detail"]["changes"][0][k] for k in ("good", "bad")} == {"***"}
    shown = run_cli("case", "show", cid, "--ledger", str(ledger))
    assert shown.returncode == 0 and TOKEN in shown.stdout, shown.stderr
    exported = run_cli("ledger", "export", "--ledger", str(ledger))
    assert exported.returncode == 0, exported.stderr
    for text in (shown.stdout, exported.stdout, str(doc)):
        assert "hunter" not in text
    # its values were not recorded: it cannot be resumed (it would set ``***``)
    resumed = run_cli("case", "bisect", cid, "--resume", "-f", str(spec), "--ledger", str(ledger))
    assert resumed.returncode == 2, resumed.stderr + resumed.stdout
    assert f"values of decode:{TOKEN} were recorded masked" in resumed.stderr
    assert _events(ledger, cid) == doc["events"]


def test_a_knob_changed_twice_is_refused_before_recording(setup: tuple[Path, Path, str]) -> None:
    spec, ledger, cid = setup
    before = _events(ledger, cid)
    twice = ("--change", f"decode:{TOKEN}=hunter2,hunter3", "--change", f"decode:{TOKEN}=a,b")
    done = run_cli("case", "bisect", cid, *twice, "--test", "soak", "-f", str(spec),
                   "--ledger", str(ledger))  # fmt: skip
    assert done.returncode == 2, done.stderr + done.stdout
    assert f"decode/{TOKEN} is changed twice" in done.stderr
    assert _events(ledger, cid) == before
    assert "hunter" not in done.stderr + done.stdout


def test_a_bisection_that_did_not_probe_the_good_state_first_is_not_resumed(
    setup: tuple[Path, Path, str],
) -> None:
    """An unfinished bisection an older servelab recorded (its first probe ddmin's, the good state
    never probed): resuming it would convict on the old assumption; refused, exit 2, nothing
    recorded (issue 38)."""
    spec, ledger, cid = setup
    changes = (Change("decode", DEFAULT_KNOB, "512", "256"), Change("decode", "OTHER", None, "1"))
    start = BisectRecord(int(cid), changes, parse_probe_test("soak"), runs=1)
    with Ledger.open(ledger) as led:
        bisect_id = led.add(CaseEvent(at=NOW, case_id=int(cid), kind=BisectRecord.KIND,
                                      detail=encode(start)))  # fmt: skip
        probe = ProbeRecord(int(cid), bisect_id, 1, (0,), ProbeOutcome.GOOD, 1)
        led.add(CaseEvent(at=NOW, case_id=int(cid), kind=ProbeRecord.KIND, detail=encode(probe)))
    before = _events(ledger, cid)
    done = run_cli("case", "bisect", cid, "--resume", "-f", str(spec), "--ledger", str(ledger))
    assert done.returncode == 2, done.stderr + done.stdout
    assert f"bisection {bisect_id} did not probe the good state first" in done.stderr
    assert _events(ledger, cid) == before
