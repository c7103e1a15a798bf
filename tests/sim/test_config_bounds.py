"""``servelab sim --config FILE.yaml`` read by the one bounded loader (issue 38, the tenth pass,
H7): an alias bomb, a file past 256 KiB and a nesting past 32 levels are usage errors (status 2,
one error line naming the file and the line), in milliseconds; a YAML error never quotes the
file's line (an ``api-key: "sk-...`` line); a secret typed on the command line is masked in
argparse's "unrecognized arguments"."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from servelab.sim.engineargs import ArgsExit, parse_worker_args

SECRET = "sk-PLANTEDabcdefghijklmnop1234"


def _bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join([*lines, "max-running-requests: *a9", ""])


def _refusal(tmp_path: Path, text: str, *extra: str) -> str:
    config = tmp_path / "decode.yaml"
    config.write_text(text)
    start = time.perf_counter()
    with pytest.raises(ArgsExit) as caught:
        parse_worker_args("decode", ["--port", "31000", "--config", str(config), *extra])
    assert time.perf_counter() - start < 5  # refused before any work (it grew without bound)
    assert caught.value.status == 2
    errors = [line for line in caught.value.text.splitlines() if "error:" in line]
    assert len(errors) == 1, caught.value.text
    assert str(config) in errors[0]
    return errors[0]


def test_an_alias_bomb_is_refused_at_its_first_anchor(tmp_path: Path) -> None:
    assert "decode.yaml:1: an anchor (&name)" in _refusal(tmp_path, _bomb())


def test_an_alias_alone_is_refused(tmp_path: Path) -> None:
    said = _refusal(tmp_path, "max-running-requests: *x\n")
    assert "decode.yaml:1:" in said and "alias" in said


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    said = _refusal(tmp_path, "# " + "x" * (300 * 1024) + "\n")
    assert "larger than 262,144 bytes" in said


def test_a_deep_nesting_is_refused(tmp_path: Path) -> None:
    assert "nested deeper than 32 levels" in _refusal(tmp_path, "a: " + "[" * 40 + "]" * 40)


def test_a_malformed_file_never_quotes_its_secret_line(tmp_path: Path) -> None:
    said = _refusal(tmp_path, f'port: 1\napi-key: "{SECRET}\nx: [\n')
    assert "not valid YAML" in said and SECRET not in said and "sk-" not in said


def test_a_secret_in_unrecognized_arguments_is_masked(tmp_path: Path) -> None:
    for argv in (["--api-key", SECRET, "--bogus"], [f"--api-key={SECRET}"], ["--token", SECRET]):
        with pytest.raises(ArgsExit) as caught:
            parse_worker_args("decode", ["--port", "31000", *argv])
        assert caught.value.status == 2 and "unrecognized arguments" in caught.value.text
        assert SECRET not in caught.value.text and "***" in caught.value.text
    config = tmp_path / "decode.yaml"
    config.write_text(f"api-key: {SECRET}\n")  # a valid file: its key becomes an argument
    with pytest.raises(ArgsExit) as caught:
        parse_worker_args("decode", ["--port", "31000", "--config", str(config)])
    assert SECRET not in caught.value.text and "--api-key ***" in caught.value.text
