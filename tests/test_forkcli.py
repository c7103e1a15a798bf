"""The fork server (tests/support/forkcli.py) against a real exec of the same command: a probe
module run both ways must see the same environment, cwd, ``sys.path[0]``, argv, stdin, umask,
signal dispositions, standard streams, time zone and temporary folder, and end the same way (exit
code, an exception's traceback, a signal's death, Ctrl-C's); servelab's own commands must print
the same and exit the same; a timeout kills the child as ``subprocess.run`` does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import forkcli, run_cli

PROBE = textwrap.dedent(
    """
    import json, os, random, signal, sys, tempfile, time

    def disposition(signum):
        handler = signal.getsignal(signum)
        return getattr(handler, "__name__", str(handler))

    def stream(s):
        raw = getattr(s.buffer, "raw", s.buffer)
        own = getattr(sys, "__" + raw.name[1:-1] + "__")
        return [s.encoding, s.errors, s.line_buffering, s.write_through, type(s.buffer).__name__,
                raw.name, s.mode, s.isatty(), s.fileno(), s is own]

    mask = os.umask(0)
    seen = {
        "env": dict(os.environ),
        "cwd": os.getcwd(),
        "path0": sys.path[0],
        "argv": sys.argv,
        "name": __name__,
        "stdin": sys.stdin.read(),
        "umask": mask,
        "signals": {int(s): disposition(s) for s in signal.valid_signals()
                    if s not in (signal.SIGKILL, signal.SIGSTOP)},
        "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "streams": [stream(sys.stdin), stream(sys.stdout), stream(sys.stderr)],
        "tz": [time.tzname, time.timezone],
        "tmp": tempfile.gettempdir(),
    }
    print(json.dumps(seen, sort_keys=True))
    print("a line on stderr, é", file=sys.stderr)
    sys.stdout.flush()
    how = sys.argv[1]
    if how == "exit":
        sys.exit(int(sys.argv[2]))
    if how == "message":
        sys.exit("a SystemExit with a message")
    if how == "raise":
        raise ValueError("the probe's failure")
    if how == "interrupt":
        raise KeyboardInterrupt
    if how == "signal":
        os.kill(os.getpid(), int(sys.argv[2]))
        time.sleep(30)
    if how == "sleep":
        open("pid", "w").write(str(os.getpid()))
        time.sleep(60)
    """
)


@pytest.fixture(scope="module")
def server() -> forkcli.ForkServer:
    srv, _started = forkcli.server()
    assert srv is not None, "the fork server did not start"
    return srv


@contextmanager
def stdin_from(path: Path) -> Iterator[None]:
    """fd 0 of this process reads ``path`` (opened afresh: each run reads it whole)."""
    saved = os.dup(0)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.dup2(fd, 0)
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(fd)


def both(
    srv: forkcli.ForkServer, module: str, args: list[str], cwd: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The command exec'd (as run_cli did) and forked, with the same stdin, cwd and env."""
    (cwd / "stdin.txt").write_bytes(b"what the caller's stdin holds\r\nline two\n\xc3\xa9")
    with stdin_from(cwd / "stdin.txt"):
        execd = subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    with stdin_from(cwd / "stdin.txt"):
        forked = forkcli.run_forked(srv, args, cwd, env, 60, module=module).done
    return execd, forked


def probe_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        **os.environ,
        "PROBE_SECRET": "not the server's",
        "TZ": "XYZ+03:30",
        "TMPDIR": str(tmp_path / "tmp"),
        "SERVELAB_LEDGER": str(tmp_path / "ledger.db"),
    }


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["exit", "0"], 0),
        (["exit", "3"], 3),
        (["message"], 1),
        (["raise"], 1),
        (["interrupt"], -2),
        (["signal", "15"], -15),
        (["signal", "6"], -6),
    ],
)
def test_a_forked_probe_sees_and_ends_as_an_execd_one(
    server: forkcli.ForkServer, tmp_path: Path, args: list[str], code: int
) -> None:
    (tmp_path / "zprobe.py").write_text(PROBE)
    env = probe_env(tmp_path)
    assert server.serves(env)
    execd, forked = both(server, "zprobe", args, tmp_path, env)
    assert execd.returncode == code, execd.stderr
    assert forked.returncode == execd.returncode, forked.stderr
    seen, want = json.loads(forked.stdout), json.loads(execd.stdout)
    assert seen["env"]["PROBE_SECRET"] == "not the server's"
    assert seen == want
    assert from_the_probe(forked.stderr) == from_the_probe(execd.stderr)


def test_signals_the_caller_ignores_stay_ignored_the_rest_are_reset(
    server: forkcli.ForkServer, tmp_path: Path
) -> None:
    """As exec does: SIGUSR1 ignored here is ignored in the child; SIGHUP handled here (and
    SIGTERM, SIGCHLD) are at their default there, whatever the server's own are."""
    (tmp_path / "zprobe.py").write_text(PROBE)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGUSR1, signal.SIGHUP)}
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, lambda *_: None)
    try:
        execd, forked = both(server, "zprobe", ["exit", "0"], tmp_path, probe_env(tmp_path))
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    want = json.loads(execd.stdout)["signals"]
    assert want[str(int(signal.SIGUSR1))] == str(int(signal.SIG_IGN))
    assert json.loads(forked.stdout)["signals"] == want


def from_the_probe(stderr: str) -> str:
    """``stderr`` without a traceback's frames above the probe's own: they are the runner's
    (``<frozen runpy>`` for ``-m``; the server's and ``runpy.run_module``'s when forked)."""
    lines = stderr.splitlines(keepends=True)
    if "Traceback (most recent call last):\n" not in lines:
        return stderr
    start = lines.index("Traceback (most recent call last):\n")
    probe = next(i for i, line in enumerate(lines) if "zprobe.py" in line)
    assert probe > start
    return "".join(lines[: start + 1] + lines[probe:])


@pytest.mark.parametrize(
    "given",
    ["", "y\n", "first line\r\nsecond é\n\u2028", "n" * (1 << 18)],
    ids=["empty", "an-answer", "crlf-and-utf8", "four-pipes-full"],
)
def test_input_is_a_pipe_fed_as_subprocess_run_feeds_it(
    server: forkcli.ForkServer, tmp_path: Path, given: str
) -> None:
    """``input=``: the child reads the same text from the same kind of stdin (a pipe, at its
    end once fed) as ``subprocess.run(input=)`` gives it; 256 KiB, echoed back, is more than a
    pipe holds both ways (fed while its output is read, nothing stalls)."""
    (tmp_path / "zprobe.py").write_text(PROBE)
    env = probe_env(tmp_path)
    execd = subprocess.run(
        [sys.executable, "-m", "zprobe", "exit", "0"], cwd=tmp_path, env=env, input=given,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    forked = forkcli.run_forked(
        server, ["exit", "0"], tmp_path, env, 60, module="zprobe", input=given
    ).done
    assert forked.returncode == execd.returncode == 0, forked.stderr
    seen, want = json.loads(forked.stdout), json.loads(execd.stdout)
    assert seen["stdin"] == want["stdin"] and want["stdin"] in (given, given.replace("\r\n", "\n"))
    assert seen == want


def test_run_cli_unsets_and_feeds_forked_as_execd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_cli's ``unset`` and ``input``, both ways: ``servelab case open`` reads no stdin, the
    ledger named by an unset SERVELAB_LEDGER is not the one written (``--ledger`` is)."""
    monkeypatch.setenv("SERVELAB_LEDGER", str(tmp_path / "outer.db"))
    runs = []
    for fork in ("1", "0"):
        monkeypatch.setenv(forkcli.FORK_ENV, fork)
        led = str(tmp_path / f"l{fork}.db")
        runs.append(run_cli("case", "open", "x", "--ledger", led, unset=("SERVELAB_LEDGER",),
                            input="ignored\n", cwd=tmp_path))  # fmt: skip
        listed = run_cli("case", "list", "--json", cwd=tmp_path, env={"SERVELAB_LEDGER": led})
        assert json.loads(listed.stdout)[0]["title"] == "x", listed.stderr
    assert [r.returncode for r in runs] == [0, 0], runs
    assert runs[0].stdout.replace("l1.db", "l0.db") == runs[1].stdout
    assert not (tmp_path / "outer.db").exists()


def test_the_random_module_is_reseeded_in_each_child(
    server: forkcli.ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "zrandom.py").write_text("import random\nprint(random.random())\n")
    draws = {forkcli.run_forked(server, [], tmp_path, dict(os.environ), 60, module="zrandom")
             .done.stdout for _ in range(3)}  # fmt: skip
    assert len(draws) == 3


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["status", "-f", "missing.toml"],
        ["status", "-f", "spec.toml"],
        ["ledger", "stats", "--json"],
        ["case", "list"],
        ["knob", "get", "nope", "-f", "spec.toml", "--json"],
    ],
)
def test_servelab_forked_prints_and_exits_as_execd(
    server: forkcli.ForkServer, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "spec.toml").write_text("[deployment]\nname = 'x'\n[services.a]\nrole = 'nope'\n")
    env = probe_env(tmp_path)
    execd, forked = both(server, "servelab", args, tmp_path, env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        execd.returncode, execd.stdout, execd.stderr,
    )  # fmt: skip


def test_a_timeout_kills_the_child_as_subprocess_run_does(
    server: forkcli.ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "zprobe.py").write_text(PROBE)
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        forkcli.run_forked(server, ["sleep"], tmp_path, dict(os.environ), 2, module="zprobe")
    assert caught.value.cmd == [sys.executable, "-m", "zprobe", "sleep"]
    assert b'"cwd"' in caught.value.output  # what it printed before the deadline
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped (the server waits before answering)
        os.kill(pid, 0)


def test_a_call_whose_start_would_differ_is_not_served(server: forkcli.ForkServer) -> None:
    """Interpreter settings (PYTHON*, the locale) and the names the server's imports read are
    the server's: a call with others is exec'd by run_cli."""
    assert server.serves(dict(server.env))
    assert not server.serves({**server.env, "PYTHONPATH": "/elsewhere"})
    assert not server.serves({**server.env, "LC_ALL": "C"})
    # read by OpenSSL (in C) as aiohttp makes its SSL context at import
    assert not server.serves({**server.env, "SSL_CERT_FILE": "/elsewhere/ca.pem"})
    assert not server.serves({**server.env, "FORCE_COLOR": "1"})  # rich's console, at import
    assert "PYTHONDONTWRITEBYTECODE" not in server.env  # tests/conftest.py: what run_cli passes
