"""The system programs some tests need (OpenSSH's server, Chromium), and what their absence means.

A developer without root who lacks them gets a skip with a clear reason; in CI (``CI`` set, as
every CI service does) or as root (who can install them: ``make sysdeps``) their absence fails the
test instead, so the SSH and browser tests never skip silently where they are meant to run.
:func:`required` says which case applies, :func:`missing` skips or fails accordingly,
:func:`chromium` finds the browser.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import NoReturn

import pytest

__all__ = ["HINT", "chromium", "missing", "required"]

#: How to install what is missing (scripts/sysdeps.sh, run by ``make test``).
HINT = "run `bash scripts/sysdeps.sh` as root (make sysdeps)"

_NOT_SET = frozenset({"", "0", "false", "no", "off"})


def required(env: Mapping[str, str] | None = None, uid: int | None = None) -> bool:
    """Whether a missing system program fails the test: ``CI`` is set (not "", 0, false, no,
    off) or the tests run as root. ``env``/``uid`` default to this process's."""
    env = os.environ if env is None else env
    uid = os.geteuid() if uid is None else uid
    return uid == 0 or env.get("CI", "").strip().lower() not in _NOT_SET


def missing(reason: str, env: Mapping[str, str] | None = None, uid: int | None = None) -> NoReturn:
    """Fail (CI or root) or skip (a developer without root) the calling test: ``reason`` is
    missing."""
    if required(env, uid):
        pytest.fail(f"{reason}: required when CI is set or running as root; {HINT}")
    pytest.skip(f"{reason}: {HINT}")


def chromium(names: tuple[str, ...] = ("chromium", "chromium-browser")) -> str:
    """The path of the first of ``names`` on PATH, else :func:`missing`."""
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    missing(f"Chromium is not installed (none of {', '.join(names)} on PATH)")
