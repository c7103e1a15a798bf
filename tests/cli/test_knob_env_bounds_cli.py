"""``knob get``, ``knob set`` and ``knob diff`` on a service's env file that is too large, a FIFO
or a device (issue 38), real processes and real files, nothing running: each said "error: local:
cannot read ...: larger than 1048576 bytes" or "not a regular file" with exit 1, as if the host
had failed; now bad input, exit 2, naming the spec's field and the file, the file never read nor
written (a FIFO is never waited on)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from tests.support import free_port, run_cli
from tests.support.specs import write_decode_spec, write_pd_spec

COMMANDS = (["get", "decode", DEFAULT_KNOB], ["set", "decode", f"{DEFAULT_KNOB}=512"],
            ["diff", "decode", DEFAULT_KNOB])  # fmt: skip


def _spec(tmp_path: Path, kind: str) -> tuple[Path, str]:
    spec = write_decode_spec(tmp_path, free_port(), knobs=(DEFAULT_KNOB,))
    env_file = tmp_path / "env" / "decode.env"
    if kind == "large":
        with env_file.open("wb") as out:  # 1 MiB and a byte, sparse
            out.truncate((1 << 20) + 1)
    elif kind == "fifo":
        os.mkfifo(env_file)
    else:
        spec.write_text(spec.read_text().replace('"env/decode.env"', '"/dev/zero"'))
        return spec, "/dev/zero"
    return spec, str(env_file)


@pytest.mark.parametrize("kind", ["large", "fifo", "device"])
def test_an_env_file_refused_unread_is_exit_2_naming_the_field_and_the_file(
    tmp_path: Path, kind: str
) -> None:
    spec, path = _spec(tmp_path, kind)
    said = ("larger than 1,048,576 bytes, the most an env file is read up to" if kind == "large"
            else "not a regular file (a FIFO, a device or a directory), never read")  # fmt: skip
    for argv in COMMANDS:
        done = run_cli("knob", *argv, "-f", str(spec), timeout=60)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"{path} (services.decode.env_file): {said}" in done.stderr, (argv, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    if kind == "large":
        assert Path(path).stat().st_size == (1 << 20) + 1  # never rewritten


def test_an_argument_knob_read_from_a_fifo_env_file_is_exit_2(tmp_path: Path) -> None:
    """An argument knob read from the env file's ``args_env`` goes the same way."""
    mrr = "--max-running-requests"
    spec = write_pd_spec(tmp_path, knobs=(mrr,), decode_toml='args_env = "SGLANG_ARGS"\n')
    env_file = tmp_path / "env" / "decode.env"
    env_file.unlink()
    os.mkfifo(env_file)
    for argv in (["get", "decode"], ["set", "decode"]):
        knob = mrr if argv[0] == "get" else f"{mrr}=8"
        done = run_cli("knob", *argv, "-f", str(spec), "--", knob, timeout=60)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"{env_file} (services.decode.env_file): not a regular file" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_every_other_reader_of_an_env_file_refused_unread_is_exit_2(
    tmp_path: Path, kind: str
) -> None:
    """The sixteenth pass (issue 38): verify's file layer, ``up``, ``restart`` and ``restart
    --rollback`` (their pre-flight, the copies a rollback keeps) said "cannot read ...: not a
    regular file", exit 1 (verify: a failed check); now bad input, exit 2, naming the field and
    the file, nothing started, the FIFO never waited on."""
    spec, path = _spec(tmp_path, kind)
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    said = f"{path} (services.decode.env_file): not a regular file"
    for argv in (["verify"], ["verify", "--layer", "config"], ["up"], ["restart", "decode"],
                 ["restart", "decode", "--rollback"]):  # fmt: skip
        done = run_cli(*argv, "-f", str(spec), env=env, timeout=60)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert said in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "state" / "backups").exists() or not any(
        (tmp_path / "state" / "backups").rglob("*.pre-restart-*")
    )


def test_a_fifo_config_file_is_exit_2_naming_its_field(tmp_path: Path) -> None:
    """The same of a ``config_file``: ``knob get|set|diff`` of an argument knob, ``up``,
    ``restart --rollback`` and ``verify`` said "local: cannot read ...", exit 1."""
    mrr = "--max-running-requests"
    spec = write_pd_spec(tmp_path, knobs=(mrr,), knob=None)
    spec.write_text(spec.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nconfig_file = "decode.yaml"\n', 1
    ))  # fmt: skip
    os.mkfifo(tmp_path / "decode.yaml")
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    said = f"{tmp_path / 'decode.yaml'} (services.decode.config_file): not a regular file"
    runs = ((["knob", "get", "decode"], [mrr]), (["knob", "set", "decode"], [f"{mrr}=8"]),
            (["knob", "diff", "decode"], [mrr]), (["up"], []),
            (["restart", "decode", "--rollback"], []), (["verify"], []))  # fmt: skip
    for argv, tail in runs:
        done = run_cli(*argv, "-f", str(spec), *(["--", *tail] if tail else []), env=env,
                       timeout=60)  # fmt: skip
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert said in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr
