"""Loading a spec writes nothing; the embedded default's env files are made by one function."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_ENV_FILES, DEFAULT_KNOB
from servelab.errors import SpecError
from servelab.io.specfile import MAX_SPEC_BYTES, load_spec, materialize_default_env
from tests.support import run_cli


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_load_spec_writes_nothing(tmp_path: Path) -> None:
    loaded = load_spec(cwd=tmp_path)
    assert loaded.embedded
    assert _tree(tmp_path) == []
    spec = tmp_path / "servelab.toml"
    spec.write_text(
        'name = "t"\n\n[services.router]\nrole = "router"\nurl = "http://127.0.0.1:9"\n'
        'start = "true"\n',
        encoding="utf-8",
    )
    assert not load_spec(spec).embedded
    assert load_spec(cwd=tmp_path).source == str(tmp_path / "servelab.toml")
    assert _tree(tmp_path) == ["servelab.toml"]


def test_materialize_default_env_creates_missing_files_once(tmp_path: Path) -> None:
    loaded = load_spec(cwd=tmp_path)
    written = materialize_default_env(loaded)
    names = [name for name in loaded.spec.services if loaded.env_file(name) is not None]
    assert sorted(written) == sorted(p for n in names if (p := loaded.env_file(n)) is not None)
    decode = loaded.env_file("decode")
    assert decode is not None and decode.read_text() == DEFAULT_ENV_FILES["decode"]
    decode.write_text(f"{DEFAULT_KNOB}=1\n")  # the user's edit is never overwritten
    assert materialize_default_env(loaded) == []
    assert decode.read_text() == f"{DEFAULT_KNOB}=1\n"


def test_a_spec_file_s_env_files_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "t"\n\n[services.decode]\nrole = "decode"\nurl = "http://127.0.0.1:9"\n'
        'start = "true"\nenv_file = "env/d.env"\n',
        encoding="utf-8",
    )
    assert materialize_default_env(load_spec(spec)) == []
    assert not (tmp_path / "env" / "d.env").exists()


def test_knob_get_on_a_fresh_dir_still_answers_from_the_embedded_default(tmp_path: Path) -> None:
    env = {"SERVELAB_LEDGER": str(tmp_path / "l.db")}
    got = run_cli("knob", "get", "decode", DEFAULT_KNOB, "--json", cwd=tmp_path, env=env)
    assert got.returncode == 0, got.stderr
    assert (tmp_path / ".servelab" / "env" / "decode.env").is_file()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    listed = run_cli("case", "list", cwd=fresh, env={"SERVELAB_LEDGER": ""})
    assert listed.returncode == 1 and "no ledger at" in listed.stderr  # read-only: no ledger made
    assert not (fresh / ".servelab").exists()
    opened = run_cli("case", "open", "t", cwd=fresh, env={"SERVELAB_LEDGER": ""})
    assert opened.returncode == 0, opened.stderr
    listed = run_cli("case", "list", cwd=fresh, env={"SERVELAB_LEDGER": ""})
    assert listed.returncode == 0, listed.stderr
    assert not (fresh / ".servelab" / "env").exists()  # a ledger-only command makes no env file
    assert (fresh / ".servelab" / "ledger.db").is_file()


def test_a_spec_that_is_not_utf8_is_a_spec_error_and_a_bom_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    body = '[services.w]\nrole = "generic"\nurl = "http://127.0.0.1:9000"\nstart = "true"\n'
    spec.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert load_spec(spec).spec.services["w"].port == 9000
    spec.write_bytes(body.replace("generic", "gen\xe9ric").encode("latin-1"))
    with pytest.raises(SpecError, match=r"s.toml: not UTF-8 text: byte \d+ is 0xe9"):
        load_spec(spec)
    done = run_cli("status", "-f", str(spec))
    assert done.returncode == 2 and "unexpected" not in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "huge"])
def test_a_spec_that_is_not_a_regular_file_or_is_huge_is_refused_before_it_is_read(
    kind: str, tmp_path: Path
) -> None:
    """The sixth hostile pass: ``-f /dev/zero`` read past 1.3 GB, ``-f FIFO`` waited on a writer
    for good (SIGTERM ignored). A spec is a regular file of at most MAX_SPEC_BYTES."""
    path = {"device": Path("/dev/zero"), "directory": tmp_path}.get(kind, tmp_path / "spec")
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "huge":
        path.write_bytes(b"# " + b"x" * MAX_SPEC_BYTES + b"\n")
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    said = str(raised.value)
    assert ("larger than" in said) if kind == "huge" else ("not a regular file" in said), said


def test_the_spec_as_a_process_is_refused_from_a_fifo_with_exit_2(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    done = run_cli("status", "-f", str(fifo), timeout=60)
    assert done.returncode == 2 and "not a regular file (a FIFO or pipe)" in done.stderr


def test_a_state_dir_that_is_a_file_is_the_spec_s_fault_said_at_its_key(tmp_path: Path) -> None:
    """The ninth pass: a ``state_dir`` naming a file gave each command its own "File exists"
    (the lock, the ledger); it is a spec error at ``state_dir`` now, exit 2, nothing written."""
    (tmp_path / "afile").write_text("x\n", encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text(
        'name = "t"\nstate_dir = "afile"\n\n[services.router]\nrole = "router"\n'
        'url = "http://127.0.0.1:9"\nstart = "true"\n',
        encoding="utf-8",
    )
    with pytest.raises(SpecError, match="afile exists and is not a directory"):
        load_spec(spec)
    result = run_cli("down", "-f", str(spec), "--json")
    assert result.returncode == 2, result.stderr
    assert "is not a directory" in result.stdout
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "x\n"
    (tmp_path / "afile").unlink()
    assert load_spec(spec).state_dir == tmp_path / "afile"
