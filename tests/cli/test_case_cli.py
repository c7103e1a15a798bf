"""``servelab case revert`` and ``restore`` as real processes, against a real stack and a real
ledger file. The case commands on a ledger alone are tests/cli/test_case_ledger_cli.py."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import run_cli
from tests.support.casecli import TARGET, seeded_ledger
from tests.support.casecli import cli_json as _json
from tests.support.deployed import deployed
from tests.support.history import K
from tests.support.specs import SECRET, write_pd_spec


def _answering(answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with ``answer`` on stdin (a user at the confirmation prompt)."""
    return run_cli(*args, input=answer, timeout=120)


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return seeded_ledger(tmp_path / "l" / "ledger.db")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    spec = write_pd_spec(tmp_path / "dep", time_scale=0.02, secret=SECRET, name="ledger-e2e")
    loaded = load_spec(spec)
    with deployed(loaded):
        yield loaded


def test_revert_shows_cost_asks_then_restore_verifies(stack: LoadedSpec, ledger_file: Path) -> None:
    led = ("--ledger", str(ledger_file))
    spec = ("-f", stack.source)
    env_file = stack.env_file("decode")
    assert env_file is not None
    cid = str(_json("case", "open", "agentic hang", *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "latest change", *led)

    declined = _answering("n\n", "case", "revert", cid, TARGET, *spec, *led)
    assert declined.returncode == 1, declined.stderr
    assert "cost of the revert: −11.3% at C64" in declined.stdout
    assert "n.s. at C80" in declined.stdout
    assert f"fails with {K}=512 and passes with {K}=256" in declined.stdout
    assert f"{K}=512" in env_file.read_text()  # nothing changed

    reverted = _json("case", "revert", cid, TARGET, "--yes", *spec, *led)
    assert reverted["ok"] and reverted["live"] == "256"
    assert reverted["error"] is None and reverted["verification"]["ok"]
    live = [c for c in reverted["verification"]["checks"] if c["layer"] == "live"]
    assert [(c["code"], c["detail"]) for c in live if c.get("knob") == K] == [
        ("live.match", "live 256 = file")
    ]
    assert f"{K}=256" in env_file.read_text()

    resolved = _json("case", "resolve", cid, "--root-cause", "client-side proxy",
                     "--exonerate", TARGET, "--convict", "component:proxy",
                     "--override", "seen by hand", *led)  # fmt: skip
    (item,) = resolved["restore_plan"]
    assert (item["current"], item["restore_to"]) == ("256", "512")
    again = run_cli("case", "resolve", cid, "--root-cause", "client-side proxy", "--exonerate",
                    TARGET, "--override", "seen by hand", *spec, *led)  # fmt: skip
    assert again.returncode == 0, again.stderr  # its hint names the spec it was given
    assert f"apply it with: servelab restore {cid} -f {spec[1]}" in again.stdout

    restored = _json("restore", cid, *spec, *led)
    assert restored["ok"] and restored["status"] == "restored and verified"
    assert restored["error"] is None and [i["error"] for i in restored["items"]] == [None]
    assert all(c["detail"] and c["code"] for c in restored["verification"]["checks"])
    dump = _json("ledger", "export", *led)
    last = dump["verifications"][-1]["checks"]
    assert all(c["detail"] and c["code"] for c in last), last
    shown = run_cli("case", "show", cid, *led)
    assert "restored and verified" in shown.stdout
    assert SECRET.encode() not in ledger_file.read_bytes()
