"""``knob set`` and ``knob get`` over odd text (issue 38, the eighth pass), real processes, nothing
running: a value holding a zero-width or other invisible character is refused (exit 2, its
position named, nothing written); a stored one is shown escaped; an env file with a UTF-8 BOM is
edited with its BOM kept; one in UTF-16 is refused naming the file and the encoding, unchanged."""

from __future__ import annotations

from pathlib import Path

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_port, run_cli
from tests.support.specs import write_decode_spec, write_pd_spec


def _spec(tmp_path: Path, env: bytes) -> tuple[Path, Path]:
    spec = write_decode_spec(tmp_path, free_port(), knobs=(DEFAULT_KNOB, "OTHER"))
    env_file = tmp_path / "env" / "decode.env"
    env_file.write_bytes(env)
    return spec, env_file


def test_a_value_with_a_zero_width_space_is_refused_naming_its_position(tmp_path: Path) -> None:
    spec, env_file = _spec(tmp_path, f"{DEFAULT_KNOB}=256\n".encode())
    done = run_cli("knob", "set", "decode", f"{DEFAULT_KNOB}=5\u200b12", "-f", str(spec))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "U+200B ZERO WIDTH SPACE, at position 2" in done.stderr
    assert "5\\u200b12" in done.stderr and "Traceback" not in done.stderr
    assert env_file.read_bytes() == f"{DEFAULT_KNOB}=256\n".encode()  # nothing written


def test_a_stored_value_with_a_zero_width_space_is_shown_escaped(tmp_path: Path) -> None:
    spec, _ = _spec(tmp_path, f"{DEFAULT_KNOB}=\u200b384\n".encode())
    done = run_cli("knob", "get", "decode", DEFAULT_KNOB, "-f", str(spec))
    assert done.returncode == 0, done.stderr
    assert f'{DEFAULT_KNOB}="\\u200b384"' in done.stdout and "\u200b" not in done.stdout


def test_an_env_file_with_a_utf8_bom_is_edited_and_keeps_its_bom(tmp_path: Path) -> None:
    spec, env_file = _spec(tmp_path, f"\ufeff{DEFAULT_KNOB}=256\nOTHER=1\n".encode())
    got = run_cli("knob", "get", "decode", DEFAULT_KNOB, "-f", str(spec))
    assert got.returncode == 0 and f"{DEFAULT_KNOB}=256" in got.stdout, got.stderr
    done = run_cli("knob", "set", "decode", f"{DEFAULT_KNOB}=512", "-f", str(spec))
    assert done.returncode == 0, done.stderr
    assert env_file.read_bytes() == f"\ufeff{DEFAULT_KNOB}=512\nOTHER=1\n".encode()


def test_an_env_file_in_utf16_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    raw = f"{DEFAULT_KNOB}=256\n".encode("utf-16")
    spec, env_file = _spec(tmp_path, raw)
    for argv in (["get", "decode", DEFAULT_KNOB], ["set", "decode", f"{DEFAULT_KNOB}=512"]):
        done = run_cli("knob", *argv, "-f", str(spec))
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"{env_file}: the file is UTF-16LE (byte order mark FF FE)" in done.stderr
        assert "NAME=VALUE" not in done.stderr
    assert env_file.read_bytes() == raw  # never rewritten as UTF-8


def test_tune_refuses_an_arm_with_a_zero_width_space_before_anything_runs(tmp_path: Path) -> None:
    spec = write_pd_spec(tmp_path)
    arms = f"decode:{DEFAULT_KNOB}=256,5\u200b12"
    for extra in (["--plan"], []):
        done = run_cli("tune", *extra, "--knob", arms, "-f", str(spec), timeout=120)
        assert done.returncode == 2, (extra, done.stdout, done.stderr)
        assert "U+200B ZERO WIDTH SPACE, at position 2" in done.stderr
    assert not (tmp_path / "state" / "logs").exists()  # nothing was started
