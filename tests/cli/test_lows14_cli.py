"""Issue 38, fourteenth hostile pass, the lows: each refused as a real ``servelab`` process in an
empty folder, naming what the user typed, before any work (no deployment is touched: ``tune
--plan`` runs nothing, and ``init``'s router port is bound by the test and never listens)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support import run_cli

CTAS = "decode:SGLANG_SM120_MMA_TARGET_CTAS=256,512"


def _run(tmp_path: Path, *args: str) -> tuple[int, str]:
    env = {"SERVELAB_LEDGER": str(tmp_path / "ledger.db")}
    done = run_cli(*args, cwd=tmp_path, env=env, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("typed", "quoted"),
    [("99.9999999999999999", "'p99.9999999999999999'"), ("100", "'p100'"),
     ("0." + "0" * 400 + "1", f"{('p0.' + '0' * 21)!r}… (404 characters)")],
)  # fmt: skip
def test_a_percentile_out_of_range_is_quoted_as_typed(
    tmp_path: Path, typed: str, quoted: str
) -> None:
    """``ttft_p99.9999999999999999`` is 100.0 as a float: the refusal said "got 100.0"."""
    code, err = _run(tmp_path, "tune", "--plan", "--knob", CTAS, "--slo", f"ttft_p{typed}=2s")
    assert code == 2, err
    assert f"Invalid value for '--slo': a percentile is above 0 and below 100, got {quoted}" in err
    assert "100.0" not in err and "0.0," not in err


def test_trace_generate_names_an_empty_file_and_a_kernel_folder(tmp_path: Path) -> None:
    code, err = _run(tmp_path, "trace", "generate", "")
    assert code == 2 and "Invalid value for 'FILE': an empty name names no file" in err, err
    code, err = _run(tmp_path, "trace", "generate", "/proc/self/mem")
    assert code == 1, err
    assert ("cannot write /proc/self/mem: a file is written whole through a temporary file "
            "beside it, and its folder /proc/self takes no new file") in err  # fmt: skip
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["../x", "", "a b", "\ufeffx"])
def test_init_names_a_bad_name_not_the_output(tmp_path: Path, name: str) -> None:
    """``init --name ../x -o -``: the written spec's check refused the name, naming "-"."""
    with socket.socket() as held:  # a port of the test's own, never listening
        held.bind(("127.0.0.1", 0))
        router = f"http://127.0.0.1:{held.getsockname()[1]}"
        code, err = _run(tmp_path, "init", "--name", name, "-o", "-", "--router", router)
    assert code == 2, err
    assert "Invalid value for '--name': must be 1-64 of A-Z a-z 0-9" in err
    assert f"got {name!r}" in err and "workers" not in err
