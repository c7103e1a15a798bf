"""``servelab sim decode --config`` with a hostile file, a real process (issue 38, the tenth
pass, H7): an alias bomb (9 levels of 9 aliases) and a 300 KiB file exit 2 within seconds with
one error line, no traceback; the YAML error of a malformed ``api-key:`` line and an
``--api-key sk-...`` in "unrecognized arguments" keep the secret off stderr."""

from __future__ import annotations

from pathlib import Path

from tests.sim.test_config_bounds import SECRET, _bomb
from tests.support import free_port, run_cli


def _sim(*argv: str) -> tuple[int, str]:
    done = run_cli("sim", "decode", "--port", str(free_port()), *argv, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def test_an_alias_bomb_and_a_huge_file_exit_2_with_one_error_line(tmp_path: Path) -> None:
    bomb, huge = tmp_path / "bomb.yaml", tmp_path / "huge.yaml"
    bomb.write_text(_bomb())
    huge.write_text("# " + "x" * (300 * 1024) + "\n")
    for config, said in ((bomb, "bomb.yaml:1: an anchor"), (huge, "larger than 262,144 bytes")):
        status, stderr = _sim("--config", str(config))
        errors = [line for line in stderr.splitlines() if "error:" in line]
        assert status == 2 and len(errors) == 1 and said in errors[0], stderr


def test_the_simulator_keeps_secrets_off_its_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(f'port: 1\napi-key: "{SECRET}\nx: [\n')
    for argv in (["--config", str(bad)], ["--api-key", SECRET, "--bogus"]):
        status, stderr = _sim(*argv)
        assert status == 2 and SECRET not in stderr, stderr
