"""Issue 38, fifth pass, D2, through the real CLI: ``up`` with ``ready_timeout_s = inf`` (or a
``stop_grace_s`` of 1e308) waited forever on a service that never got ready (its rollback never
killed it). The spec is refused at once, exit 2, naming the field, and nothing is started."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import free_port, run_cli


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("ready_timeout_s = inf", "services.web.ready_timeout_s: Input should be a finite number"),
        (
            "stop_grace_s = 1e308",
            "services.web.stop_grace_s: Input should be less than or equal to 86400",
        ),
    ],
)
def test_up_refuses_an_endless_timeout_promptly_naming_it(
    tmp_path: Path, setting: str, message: str
) -> None:
    started = tmp_path / "started"
    # a service that would never get ready (nothing listens on its port)
    (tmp_path / "servelab.toml").write_text(
        'name = "t"\nstate_dir = "state"\n[services.web]\nrole = "generic"\n'
        f'url = "http://127.0.0.1:{free_port()}"\nstart = "touch {started}; sleep 600"\n'
        f"{setting}\n"
    )
    began = time.monotonic()
    result = run_cli(
        "up", cwd=tmp_path, env={"SERVELAB_LEDGER": str(tmp_path / "l.db")}, timeout=60
    )
    assert result.returncode == 2, result.stderr
    assert time.monotonic() - began < 30
    assert f"servelab.toml: {message}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not started.exists()  # refused before anything was started
