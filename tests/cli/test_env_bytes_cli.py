"""``knob set`` on an env file where another variable holds a Latin-1 byte (issue 38, the tenth
pass, H6), real processes, nothing running: the byte is kept, only the knob's line changes;
``knob get`` reads the file (the byte shown as U+FFFD, never a traceback)."""

from __future__ import annotations

from pathlib import Path

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_port, run_cli
from tests.support.specs import write_decode_spec, write_pd_spec


def test_knob_set_keeps_the_latin1_bytes_of_another_variable(tmp_path: Path) -> None:
    spec = write_decode_spec(tmp_path, free_port(), knobs=(DEFAULT_KNOB, "OTHER"))
    env_file = tmp_path / "env" / "decode.env"
    raw = b"# caf\xe9\nOTHER=caf\xe9\n" + f"{DEFAULT_KNOB}=256\n".encode()
    env_file.write_bytes(raw)
    got = run_cli("knob", "get", "decode", "OTHER", "-f", str(spec))
    assert got.returncode == 0 and "Traceback" not in got.stderr, got.stderr
    assert "OTHER=caf\ufffd" in got.stdout, got.stdout
    done = run_cli("knob", "set", "decode", f"{DEFAULT_KNOB}=512", "-f", str(spec))
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert env_file.read_bytes() == raw.replace(b"=256", b"=512")


def test_an_argument_knob_keeps_the_latin1_bytes_of_its_variables_other_words(
    tmp_path: Path,
) -> None:
    """``knob set decode -- --max-running-requests=48`` rewrites the ``args_env`` variable: its
    other words (a served model name with a Latin-1 byte) and the other lines keep their bytes."""
    spec = write_pd_spec(
        tmp_path, knobs=(DEFAULT_KNOB, "--max-running-requests"),
        decode_toml='args_env = "SGLANG_ARGS"\n',
    )  # fmt: skip
    env_file = tmp_path / "env" / "decode.env"
    before = env_file.read_bytes()
    words = b'SGLANG_ARGS="--served-model-name caf\xe9 --max-running-requests 32"\n'
    env_file.write_bytes(before + b"NOTE=na\xefve\n" + words)
    done = run_cli("knob", "set", "decode", "-f", str(spec), "--", "--max-running-requests=48")
    assert done.returncode == 0, (done.stdout, done.stderr)
    after = env_file.read_bytes()
    assert after.startswith(before + b"NOTE=na\xefve\n"), after
    assert b"caf\xe9" in after and b"--max-running-requests 48" in after, after
