"""``--json`` anywhere on the line still prints the failure document of a usage error, ``--json``
after ``--`` is an argument, and errors name the spec file by the path the user gave. Real
processes, real files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servelab.io.specfile import load_spec
from tests.support import REPO
from tests.support.clierrors import (
    failure_doc,
    one_line,
    run,
)

#: Commands with an option that fails before ``--json`` is read when ``--json`` comes last.
JSON_LAST = [
    ("bench", "--requests", "-1"),
    ("soak", "--sessions", "0"),
    ("ledger", "prune", "--older-than", "xyz"),
    ("bench", "--concurrency", "zero"),
    ("ledger", "export", "--format", "xml"),
    ("knob", "set", "decode", "X=1", "--case", "abc"),
    ("bench", "--no-such-option"),  # click's parser refuses it before any option is read
    ("ledger", "prune", "--no-such-option"),
]


@pytest.mark.parametrize("args", JSON_LAST, ids=[" ".join(a) for a in JSON_LAST])
def test_json_last_still_prints_the_failure_document(args: tuple[str, ...], tmp_path: Path) -> None:
    result = run(*args, "--json", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    doc = failure_doc(result.stdout)
    command = " ".join(a for a in args[:2] if a[0] != "-")
    assert doc["exit_code"] == 2 and doc["command"] == command
    assert doc["error_type"] in ("BadParameter", "NoSuchOption")


def test_json_after_a_separator_is_an_argument_not_the_flag(tmp_path: Path) -> None:
    result = run("knob", "set", "decode", "--case", "abc", "--", "--json", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "", result.stdout


def test_errors_name_the_spec_file_and_normalised_paths(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    spec = Path("examples") / "local-sim.toml"
    result = run("knob", "set", "-f", str(spec), "decoder", "X=1", "--ledger", "l.db",
                  cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    line = one_line(result.stderr)
    assert line.startswith(f"error: {spec}: services: unknown service 'decoder'"), line
    assert "<spec>" not in line
    loaded = load_spec(tmp_path / spec)
    assert loaded.state_dir == tmp_path / ".servelab" / "local-sim"
    result = run("report", "-f", str(spec), cwd=tmp_path)  # no ledger there yet: refused
    line = one_line(result.stderr)
    assert f"no ledger at {tmp_path / '.servelab' / 'local-sim' / 'ledger.db'}" in line
    assert "/../" not in line
