"""The deployment lock (:mod:`servelab.io.lock`) between real processes: a second holder is
refused naming the first, a waiter runs once the first ends, a lock left by a process killed
with SIGKILL is taken over and says whose it was, a launched child never holds it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from servelab.errors import DeploymentBusy
from servelab.io.lock import (
    LOCK_DIR_ENV,
    LOCK_FILE,
    TRAFFIC_FILE,
    Hold,
    Holder,
    endpoint_dir,
    hold,
    holder_of,
)

#: A process that holds the lock of STATE_DIR, says so on stdout, and holds it until stdin closes.
HOLDER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from servelab.io.lock import Hold, hold
    root = Path(sys.argv[3]) if sys.argv[3] else None
    endpoints = [tuple(e) for e in json.loads(sys.argv[4])]
    kind = Hold(sys.argv[2])
    with hold(Path(sys.argv[1]), "servelab restart", name="t", kind=kind, root=root,
              endpoints=endpoints):
        print("held", flush=True)
        sys.stdin.read()
    """
)


def _holder(
    state_dir: Path,
    kind: str = "change",
    *,
    root: Path | None = None,
    endpoints: list[tuple[str, int]] | None = None,
) -> subprocess.Popen[str]:
    where = "" if root is None else str(root)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state_dir), kind, where, json.dumps(endpoints or [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    first = _holder(tmp_path)
    try:
        with pytest.raises(DeploymentBusy) as refused, hold(tmp_path, "servelab up", name="t"):
            pytest.fail("took a held lock")
        message = str(refused.value)
        assert f"deployment t is busy: `servelab restart` (pid {first.pid}, since " in message
        assert "--wait" in message
        holder = holder_of(tmp_path)
        assert holder is not None and holder.pid == first.pid
    finally:
        first.communicate("")
    with hold(tmp_path, "servelab up", name="t") as lock:  # free once it ended
        assert lock.taken_over is None
        assert holder_of(tmp_path) == lock.holder
    assert holder_of(tmp_path) is None  # released: the file names nobody


def test_a_waiter_is_told_once_and_runs_when_the_holder_ends(tmp_path: Path) -> None:
    first = _holder(tmp_path)
    told: list[Holder | None] = []

    def waiting(holder: Holder | None) -> None:
        told.append(holder)
        assert first.stdin is not None
        first.stdin.close()  # the holder ends now: the waiter gets the lock next

    with hold(tmp_path, "servelab up", name="t", wait=True, on_wait=waiting) as lock:
        assert lock.taken_over is None
    assert first.stdout is not None
    first.stdout.close()
    first.wait(timeout=30)
    assert len(told) == 1 and told[0] is not None and told[0].pid == first.pid


def test_a_lock_left_by_a_killed_process_is_taken_over_naming_it(tmp_path: Path) -> None:
    first = _holder(tmp_path)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate(timeout=30)
    with hold(tmp_path, "servelab down", name="t") as lock:
        assert lock.taken_over is not None
        assert lock.taken_over.pid == first.pid
        assert lock.taken_over.command == "servelab restart"


def test_the_lock_is_reentrant_in_one_process_and_never_inherited(tmp_path: Path) -> None:
    with hold(tmp_path, "servelab ab", name="t") as outer:
        with hold(tmp_path, "servelab restart", name="t") as inner:
            assert inner is outer
        assert holder_of(tmp_path) == outer.holder  # still held by the outer block
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with hold(tmp_path, "servelab up", name="t") as lock:  # the child does not hold it
            assert lock.taken_over is None
    finally:
        child.kill()
        child.wait()
    assert (tmp_path / LOCK_FILE).read_bytes() == b""


def test_a_lock_file_that_cannot_be_made_is_a_host_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with (
        pytest.raises(OSError, match="cannot open the deployment lock"),
        hold(tmp_path / "file", "servelab up", name="t"),
    ):
        pass


def test_a_rolling_restart_holds_beside_a_measurement_and_a_change_beside_neither(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with hold(state, "servelab bench", name="t", kind=Hold.MEASURE):
        with hold(state, "servelab restart", name="t", kind=Hold.ROLL) as roll:
            assert holder_of(state, LOCK_FILE) == roll.holder
        assert holder_of(state, TRAFFIC_FILE) is not None
    # across processes: a measurement held elsewhere refuses a change and a second measurement
    first = _holder(state, "measure")
    try:
        for kind in (Hold.CHANGE, Hold.MEASURE):
            busy = f"`servelab restart` \\(pid {first.pid}"
            with (
                pytest.raises(DeploymentBusy, match=busy),
                hold(state, "servelab up", name="t", kind=kind),
            ):
                pytest.fail("took a held lock")
        with hold(state, "servelab restart", name="t", kind=Hold.ROLL) as roll:
            assert roll.taken_over is None
        assert holder_of(state, LOCK_FILE) is None  # the refused change left nothing behind
    finally:
        first.communicate("")
    first = _holder(state, "roll")
    try:
        for kind in (Hold.CHANGE, Hold.ROLL):
            with pytest.raises(DeploymentBusy), hold(state, "servelab up", name="t", kind=kind):
                pytest.fail("took a held lock")
        with hold(state, "servelab bench", name="t", kind=Hold.MEASURE):
            pass
    finally:
        first.communicate("")


def test_two_state_dirs_owning_one_endpoint_are_one_deployment(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    endpoints = [("local", 4711), ("local", 4712)]
    first = _holder(tmp_path / "a", "measure", root=root, endpoints=endpoints)
    try:
        with (
            pytest.raises(DeploymentBusy) as refused,
            hold(tmp_path / "b", "servelab down", name="t", root=root, endpoints=[("local", 4712)]),
        ):
            pytest.fail("took a held lock")
        assert f"pid {first.pid}" in str(refused.value)
        assert str(endpoint_dir(root, "local", 4712) / TRAFFIC_FILE) in str(refused.value)
        with hold(tmp_path / "b", "servelab up", name="t", root=root, endpoints=[("local", 1)]):
            pass  # another endpoint: another deployment
    finally:
        first.communicate("")


def test_the_default_lock_root_is_this_users_own(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import os, stat, sys
        from pathlib import Path
        from servelab.io.lock import hold, lock_root
        root = lock_root()
        with hold(Path(sys.argv[1]), "servelab up", name="t", endpoints=[("local", 1)]):
            info = os.lstat(root)
            print(stat.S_IMODE(info.st_mode) & 0o077, info.st_uid == os.getuid(), root.name)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != LOCK_DIR_ENV}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "True", f"servelab-{os.getuid()}"]


def test_a_relative_lock_dir_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A relative ``SERVELAB_LOCK_DIR`` meant one lock per working directory: a command run from
    another folder took a deployment a bench held."""
    monkeypatch.setenv(LOCK_DIR_ENV, "rel")
    with (
        pytest.raises(OSError, match="SERVELAB_LOCK_DIR must be an absolute path, got 'rel'"),
        hold(tmp_path, "servelab up", name="t", endpoints=[("local", 1)]),
    ):
        pytest.fail("took a lock under a relative directory")
