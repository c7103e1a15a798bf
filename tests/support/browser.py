"""A page as a real headless Chromium parsed it (its DOM), for the HTML report tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.sysdeps import chromium

__all__ = ["dump_dom"]


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM Chromium built from ``page`` (``--dump-dom``), with its own ``profile`` dir."""
    argv = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", "--dump-dom", page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
