"""The SSH and browser tests never skip silently in CI: ``scripts/sysdeps.sh`` and the fixtures.

The script runs for real, as root and as an ordinary user (``setpriv`` to nobody when the tests
run as root; ``unshare --map-root-user`` for root when they do not). Only ``apt-get`` is replaced,
by a one-line script on PATH, so no test installs anything; ``SYSDEPS_CHROMIUM`` names a program
that does not exist, so something is always missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.sshd import require_sshd
from tests.support.sysdeps import chromium, missing, required
from tests.support.systemd import require_systemd

SCRIPT = REPO / "scripts" / "sysdeps.sh"
NOBODY = 65534
ABSENT = "servelab-no-such-browser"


def _as(uid: int) -> list[str]:
    """The argv prefix that runs a command as ``uid`` (0 or nobody)."""
    if os.geteuid() == uid:
        return []
    tool = "unshare" if uid == 0 else "setpriv"
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} (util-linux) is needed to run the script as uid {uid}")
    if uid == 0:
        return ["unshare", "--map-root-user"]
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def _sysdeps(
    uid: int, *, ci: str | None = None, apt_exit: int | None = None, bin_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``bash scripts/sysdeps.sh`` (read on stdin) as ``uid``, Chromium looked up as ABSENT."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env |= {"SYSDEPS_CHROMIUM": ABSENT, "SYSDEPS_SSHD": "/bin/sh", "SYSDEPS_SYSTEMD": "/bin/sh"}
    env["SYSDEPS_PROMETHEUS"] = "sh"
    env |= {"SYSDEPS_NGINX": "/bin/sh", "SYSDEPS_HAPROXY": "/bin/sh"}
    env["SYSDEPS_TINYPROXY"] = "/bin/sh"
    env["SYSDEPS_VARNISH"] = "/bin/sh"
    if ci is not None:
        env["CI"] = ci
    if apt_exit is not None:
        assert bin_dir is not None
        bin_dir.mkdir()
        (bin_dir / "apt-get").write_text(f"#!/bin/sh\nexit {apt_exit}\n")
        (bin_dir / "apt-get").chmod(0o755)
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
    with SCRIPT.open("rb") as script:
        argv = [*_as(uid), "bash", "-s"]
        done = subprocess.run(argv, stdin=script, capture_output=True, cwd="/", env=env, timeout=30)
    return subprocess.CompletedProcess(done.args, done.returncode, "", done.stderr.decode())


def test_nothing_missing_is_success_without_installing() -> None:
    env = {**os.environ, "SYSDEPS_CHROMIUM": "sh", "SYSDEPS_SSHD": "/bin/sh"}
    env["SYSDEPS_SYSTEMD"] = "/bin/sh"
    env["SYSDEPS_PROMETHEUS"] = "sh"
    env |= {"SYSDEPS_NGINX": "/bin/sh", "SYSDEPS_HAPROXY": "/bin/sh"}
    env["SYSDEPS_TINYPROXY"] = "/bin/sh"
    env["SYSDEPS_VARNISH"] = "/bin/sh"
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_a_developer_without_root_is_told_and_the_tests_skip() -> None:
    done = _sysdeps(NOBODY)
    assert done.returncode == 0, done.stderr
    assert "missing chromium" in done.stderr and "skip" in done.stderr


def test_ci_without_root_fails() -> None:
    done = _sysdeps(NOBODY, ci="true")
    assert done.returncode != 0
    assert "missing chromium" in done.stderr and "CI is set" in done.stderr


def test_root_whose_install_fails_fails(tmp_path: Path) -> None:
    done = _sysdeps(0, apt_exit=100, bin_dir=tmp_path / "bin")
    assert done.returncode != 0
    assert "installing chromium failed" in done.stderr


def test_root_whose_install_leaves_it_missing_fails(tmp_path: Path) -> None:
    done = _sysdeps(0, apt_exit=0, bin_dir=tmp_path / "bin")
    assert done.returncode != 0
    assert "chromium still missing after the install" in done.stderr


def test_required_in_ci_or_as_root() -> None:
    assert required({}, 0) and required({"CI": "true"}, 1000) and required({"CI": "1"}, 1000)
    assert not required({}, 1000)
    assert not any(required({"CI": v}, 1000) for v in ("", "0", "false", "No", "off"))


def test_missing_skips_for_a_developer_and_fails_in_ci_or_as_root() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"sysdeps\.sh"):
        missing("X is missing", {}, 1000)
    with pytest.raises(pytest.fail.Exception, match="required when CI is set or running as root"):
        missing("X is missing", {"CI": "true"}, 1000)
    with pytest.raises(pytest.fail.Exception, match="X is missing"):
        missing("X is missing", {}, 0)


def test_fixtures_follow_the_same_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")  # required() whatever the uid the tests run as
    with pytest.raises(pytest.fail.Exception, match="openssh-server"):
        require_sshd(tmp_path / "sshd")
    with pytest.raises(pytest.fail.Exception, match="Chromium is not installed"):
        chromium((ABSENT,))
    with pytest.raises(pytest.fail.Exception, match=r"package systemd\).*sysdeps\.sh"):
        require_systemd(tmp_path / "systemd")
