"""``servelab init`` against a hostile router (issue 38's adversarial pass): a real process
(``tests/support/hostile_router.py``) answering ``/workers`` with an endless body, 300 workers,
URLs that would inject TOML or carry credentials and secrets, ports that are not ports; and a
worker whose command line holds an ``--api-key``. init reads a bounded body, refuses a list too
long to read, leaves out what is not a worker (saying where in the list), never writes a secret
into the spec, and never ends in a traceback.

One exit rule (issue 38, the tenth pass): whatever the router answers that init cannot use (an
answer over its bound, not JSON, not a worker list, more workers than init reads, no usable
prefill or no usable decode worker) is bad input, exit 2, the message naming the router's URL and
what was wrong, and no spec written; a router that does not answer at all is exit 1
(``tests/cli/test_init_cli.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import REPO, free_port, run_cli
from tests.support.hostile_router import SECRET
from tests.support.processes import wait_answering


@contextmanager
def _hostile(mode: str, *words: str, prefill: str | None = None) -> Iterator[str]:
    """A hostile router in ``mode``; ``prefill``: a URL it lists last as a usable prefill."""
    port = free_port()
    argv = [sys.executable, "-m", "tests.support.hostile_router", str(port), mode, *words]
    env = {**os.environ, "HOSTILE_PREFILL": prefill} if prefill else None
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(url + "/v1/models", proc, 60)
        yield url
    finally:
        proc.kill()
        proc.wait(10)


@pytest.mark.timeout(180)
def test_an_endless_worker_list_is_read_to_a_bound(tmp_path: Path) -> None:
    with _hostile("huge") as url:
        done = run_cli("init", "--router", url, "-o", str(tmp_path / "s.toml"), timeout=150)
    assert done.returncode == 2, done.stderr
    assert f"GET {url}/workers: the router's /workers answer is over 1 MiB" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.toml").exists()


@pytest.mark.timeout(180)
def test_a_list_nested_deeper_than_a_parser_goes_is_no_worker_list(tmp_path: Path) -> None:
    with _hostile("deep") as url:
        done = run_cli("init", "--router", url, "-o", str(tmp_path / "s.toml"), timeout=150)
    assert done.returncode == 2, done.stderr
    assert f"GET {url}/workers: not a worker list: not JSON" in done.stderr, done.stderr
    assert "RecursionError" not in done.stderr and not (tmp_path / "s.toml").exists()


@pytest.mark.timeout(180)
def test_a_list_too_long_to_read_is_refused_naming_its_length(tmp_path: Path) -> None:
    with _hostile("many") as url:
        done = run_cli("init", "--router", url, "-o", str(tmp_path / "s.toml"), timeout=150)
    assert done.returncode == 2, done.stderr
    assert f"GET {url}/workers lists 300 workers: init reads at most 256" in done.stderr
    assert not (tmp_path / "s.toml").exists()


@pytest.mark.timeout(180)
def test_what_is_not_a_worker_is_left_out_and_said_and_no_secret_is_written(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "s.toml"
    with (
        _hostile("plain") as prefill,
        _hostile(
            "self",
            "--api-key",
            SECRET,
            "--url",
            "redis://:REDISPW99@h:6379",
            "--served-model-name",
            "sk-OTHERsecret0123456789abcd",
        ) as decode,
        _hostile("inject", decode, "--api-key", SECRET, prefill=prefill) as url,
    ):
        done = run_cli("init", "--router", url, "-o", str(spec), "--json", timeout=150)
    assert done.returncode == 0, done.stderr
    text = spec.read_text()
    out = done.stdout + done.stderr + text
    assert SECRET not in out and "pw@" not in out
    assert "REDISPW99" not in out and "sk-OTHER" not in out  # a URL's password, a token's shape
    assert "Traceback" not in out and "99999" not in text
    # what the decode reported (a newline, a line of TOML, the secret) stays inside its comment
    assert not [line for line in text.splitlines() if line.startswith(("stop", "[services.evil"))]
    for place in ("1 of 6", "2 of 6", "3 of 6", "4 of 6"):
        assert f"worker {place}" in out, out
    # the one worker kept is another hostile process: its command line, the secret masked
    assert "[services.decode]" in text or "[services.decode-1]" in text, text
    assert "--api-key ***" in text or "'--api-key' '***'" in text or "--api-key '***'" in text
    assert "move it to an env file" in out


@pytest.mark.timeout(180)
def test_a_worker_whose_url_is_not_a_string_is_said_and_left_out(tmp_path: Path) -> None:
    """Issue 38, third pass, item 9: an entry whose url is an int (or a list) was dropped
    silently; it is said, by its place in the list, as every other bad entry."""
    spec = tmp_path / "s.toml"
    with (
        _hostile("plain") as prefill,
        _hostile("self") as decode,
        _hostile("typed", decode, prefill=prefill) as url,
    ):
        done = run_cli("init", "--router", url, "-o", str(spec), timeout=150)
    assert done.returncode == 0, done.stderr
    out = done.stdout + done.stderr
    for place in ("1 of 4", "2 of 4"):
        assert f"worker {place}" in out, out
    assert "8080" not in spec.read_text()
    assert "Traceback" not in out


@pytest.mark.timeout(180)
def test_each_workers_answer_is_read_to_one_mib(tmp_path: Path) -> None:
    """The sixth hostile pass: init read each engine answer (``/server_info``,
    ``/get_server_info``, ``/version``, ``/v1/models``) up to 64 MiB: 541 MB peak for three
    hostile workers. Each is read to 1 MiB, said by the worker's name and its path."""
    from tests.support.peakrss import run_measured

    spec = tmp_path / "s.toml"
    with (
        _hostile("bloated") as one,
        _hostile("bloated") as two,
        _hostile("bloated") as three,
        _hostile("plain") as prefill,
        _hostile("fanout", one, two, three, prefill=prefill) as url,
    ):
        done, peak_mb = run_measured(
            ["init", "--router", url, "-o", str(spec)], tmp_path / "mark", timeout=150
        )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for name in ("decode-1", "decode-2", "decode-3"):
        assert f"worker {name}'s /server_info answer is over 1 MiB" in out, out
    assert "the router's /v1/models answer is over 1 MiB" in out, out
    assert "Traceback" not in out and spec.exists()
    assert peak_mb < 90, f"init's peak RSS was {peak_mb:.0f} MB"


@pytest.mark.timeout(180)
def test_a_worker_list_of_another_shape_is_refused_naming_the_router(tmp_path: Path) -> None:
    """Issue 38, eighth hostile pass: ``{"workers": "oops"}`` (200) was read as no workers: a
    spec of none written, exit 0. It is refused (exit 2), naming the URL and what was wrong."""
    spec = tmp_path / "s.toml"
    with _hostile("garbage") as url:
        done = run_cli("init", "--router", url, "-o", str(spec), timeout=150)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"GET {url}/workers: not a worker list" in done.stderr, done.stderr
    assert '"workers" is a string, not a list' in done.stderr
    assert not spec.exists() and "Traceback" not in done.stderr


@pytest.mark.timeout(180)
def test_control_characters_a_router_lists_never_reach_the_terminal(tmp_path: Path) -> None:
    """An ``ESC`` sequence, a ``NUL`` and a newline in a listed worker are said escaped."""
    spec = tmp_path / "s.toml"
    with _hostile("escapes") as url:
        done = run_cli("init", "--router", url, "-o", str(spec), "--json", timeout=150)
    out = done.stdout + done.stderr + (spec.read_text() if spec.exists() else "")
    assert "\x1b" not in out and "\x00" not in out and "\x07" not in out, repr(out)
    assert "Traceback" not in out
    # its one worker is left out: a spec of no worker is never written (exit 2, the URL named)
    assert done.returncode == 2 and not spec.exists(), out
    doc = json.loads(done.stdout)
    assert doc["error_type"] == "WorkerListError", doc
    said = f"GET {url}/workers: lists 1 worker(s), no usable prefill and no usable decode worker"
    assert (
        said in doc["error"] and "worker 1 of 1: not an http(s)://host[:port] URL" in doc["error"]
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("empty", "lists 0 worker(s), no usable prefill and no usable decode worker"),
        ("self", "lists 1 worker(s), no usable prefill worker: init writes no spec without"),
    ],
)
def test_a_list_without_a_prefill_or_a_decode_writes_no_spec(
    mode: str, said: str, tmp_path: Path
) -> None:
    """Issue 38, tenth pass: a router listing no workers, or only decode workers, was written as
    a spec of what it listed (a spec of 0 workers, exit 0). Exit 2, naming the URL and what the
    list lacks; nothing is written."""
    spec = tmp_path / "s.toml"
    with _hostile(mode) as url:
        done = run_cli("init", "--router", url, "-o", str(spec), timeout=150)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"GET {url}/workers: {said}" in done.stderr, done.stderr
    assert not spec.exists() and "Traceback" not in done.stderr
