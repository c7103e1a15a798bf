"""``restore`` and ``case revert`` never overwrite a hand edit silently (issue 38, the eighth
pass): when a knob's file holds another value than servelab last wrote there (the ledger's newest
change), they exit 2 naming the file and the key, before anything is written or restarted, unless
``--force``. Real processes; the spec's only service cannot start (``exit 3``), so a command that
got as far as a restart fails with exit 1 and shows it."""

from __future__ import annotations

from pathlib import Path

from servelab.core.case.record import CaseRecord
from servelab.core.knobs.record import KnobChangeRecord
from servelab.io.hosts.envfiles import file_backup_dir
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tables import NOW
from servelab.ops.case import case as cases
from tests.support import free_ports, run_cli
from tests.support.history import K

TARGET = f"knob:decode/{K}"


def _spec(tmp_path: Path, value: str) -> tuple[Path, Path]:
    (port,) = free_ports(1)
    env = tmp_path / "decode.env"
    env.write_text(f"{K}={value}\nOTHER=1\n")
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        f'state_dir = "state"\n[services.decode]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{port}"\nstart = "exit 3"\nenv_file = "decode.env"\n'
        f'knobs = ["{K}"]\nready_timeout_s = 3\nstart_timeout_s = 3\n'
    )
    return spec, env


def _written(ledger_file: Path) -> list[str | None]:
    """Every value servelab wrote to the knob, in order (the ledger's knob changes)."""
    with Ledger.open(ledger_file) as ledger:
        return [c.new for c in sorted(ledger.list(KnobChangeRecord, name=K), key=lambda c: c.id)]


def _resolved_case(ledger_file: Path) -> tuple[str, int]:
    """A case that reverted the knob 512 -> 256 and exonerated it: its plan restores 512."""
    with Ledger.open(ledger_file) as ledger:
        case_id = ledger.add(CaseRecord(id=0, at=NOW, title="hang", status="open"))
        change = ledger.add(
            KnobChangeRecord(id=0, at=NOW, service="decode", name=K, case_id=case_id,
                             old="512", new="256", reason="suspected")
        )  # fmt: skip
    done = run_cli("case", "resolve", str(case_id), "--root-cause", "proxy", "--exonerate",
                   TARGET, "--ledger", str(ledger_file))  # fmt: skip
    assert done.returncode == 0, done.stderr
    return str(case_id), change


def test_restore_refuses_a_hand_edit_then_force_overwrites_it(tmp_path: Path) -> None:
    ledger_file = tmp_path / "l" / "ledger.db"
    spec, env = _spec(tmp_path, "300")  # servelab wrote 256; someone wrote 300 since
    cid, change = _resolved_case(ledger_file)
    led = ("-f", str(spec), "--ledger", str(ledger_file))
    refused = run_cli("restore", cid, *led)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (
        f"{env}: {K} is 300 there, not 256 as servelab last wrote it (change #{change})"
        in refused.stderr
    )
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert env.read_text() == f"{K}=300\nOTHER=1\n"  # nothing written
    assert not (tmp_path / "state" / "logs").exists()  # nothing restarted
    forced = run_cli("restore", cid, "--force", *led)
    assert forced.returncode == 1, forced.stdout + forced.stderr  # the restart fails (exit 3)
    assert _written(ledger_file)[-2:] == ["512", "300"]  # the plan's value, written over the edit
    # The restart failed: the value found is put back (tenth pass), the service named down.
    assert env.read_text() == f"{K}=300\nOTHER=1\n"
    assert "down: decode; bring them back with: servelab up" in forced.stdout + forced.stderr


def test_restore_goes_ahead_when_the_file_holds_what_servelab_wrote(tmp_path: Path) -> None:
    ledger_file = tmp_path / "l" / "ledger.db"
    spec, env = _spec(tmp_path, "256")
    cid, _ = _resolved_case(ledger_file)
    done = run_cli("restore", cid, "-f", str(spec), "--ledger", str(ledger_file))
    assert done.returncode == 1, done.stdout + done.stderr  # got as far as the restart
    assert "changed since" not in done.stderr
    assert _written(ledger_file)[-2:] == ["512", "256"]  # written, then put back as found
    assert env.read_text() == f"{K}=256\nOTHER=1\n"


def test_case_revert_refuses_a_hand_edit_back_to_an_older_value(tmp_path: Path) -> None:
    """The file holds 512, a value an older change wrote (so the preview finds a change that set
    it), but servelab's last write was 256: the revert would silently undo the edit."""
    ledger_file = tmp_path / "l" / "ledger.db"
    spec, env = _spec(tmp_path, "512")
    with Ledger.open(ledger_file) as ledger:
        ledger.add(KnobChangeRecord(id=0, at=NOW, service="decode", name=K, old="256",
                                    new="512", reason="A/B"))  # fmt: skip
        last = ledger.add(KnobChangeRecord(id=0, at=NOW, service="decode", name=K, old="512",
                                           new="256", reason="tuned"))  # fmt: skip
        cid = cases.open_case(ledger, "stall")
        cases.add_suspect(ledger, cid, TARGET, "latest change")
    led = ("-f", str(spec), "--ledger", str(ledger_file))
    refused = run_cli("case", "revert", str(cid), TARGET, "--yes", *led)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{env}: {K} is 512 there, not 256 as servelab last wrote it (change #{last})" in (
        refused.stderr
    )
    assert env.read_text() == f"{K}=512\nOTHER=1\n"
    assert not (tmp_path / "state" / "logs").exists()
    refused_to = run_cli("case", "revert", str(cid), TARGET, "--to", "128", "--yes", *led)
    assert refused_to.returncode == 2 and "the file was changed since" in refused_to.stderr
    forced = run_cli("case", "revert", str(cid), TARGET, "--to", "128", "--yes", "--force", *led)
    assert forced.returncode == 1, forced.stdout + forced.stderr  # the restart fails (exit 3)
    assert _written(ledger_file)[-2:] == ["128", "512"]  # written, then put back as found
    assert env.read_text() == f"{K}=512\nOTHER=1\n"
    assert "down: decode; bring them back with: servelab up" in forced.stdout + forced.stderr


def test_restore_and_revert_refuse_an_env_file_that_is_gone_forced_or_not(tmp_path: Path) -> None:
    """The env file deleted: without the check, ``restore`` said the knob was "unset there" (a
    hand edit), and ``--force`` created a file holding only the knob (OTHER lost) and restarted."""
    ledger_file = tmp_path / "l" / "ledger.db"
    spec, env = _spec(tmp_path, "256")
    cid, _ = _resolved_case(ledger_file)
    backups = Path(file_backup_dir(str(tmp_path / "state" / "backups" / "decode"), str(env)))
    backups.mkdir(parents=True)
    (backups / "decode.env.bak-20261206T000000Z").write_text(f"{K}=256\nOTHER=1\n")
    env.unlink()
    led = ("-f", str(spec), "--ledger", str(ledger_file))
    for argv in (("restore", cid), ("restore", cid, "--force")):
        refused = run_cli(*argv, *led)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        line = " ".join(refused.stderr.split())
        assert f"local:{env}: decode's env file does not exist (deleted?)" in line, line
        assert "decode.env.bak-20261206T000000Z" in line and "Traceback" not in line
        assert not env.exists()  # nothing written
        assert not (tmp_path / "state" / "logs").exists()  # nothing restarted
