"""``servelab status`` never shows a spec URL's password (issue 38, third pass, item 8): the
table and ``--json`` (the service's URL and its readiness probe's) show ``user:***@``. A real
process; nothing listens at the URL (the probe's failure is part of what is shown)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli

PASSWORD = "hunter2status0PASSWORD"


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_status_masks_the_password_of_a_spec_url(tmp_path: Path, as_json: bool) -> None:
    (tmp_path / "servelab.toml").write_text(
        'state_dir = "state"\n[services.decode]\nrole = "decode"\n'
        f'url = "http://admin:{PASSWORD}@127.0.0.1:9"\nstart = "sim"\n'
    )
    done = run_cli("status", *(["--json"] if as_json else []), cwd=tmp_path)
    out = done.stdout + done.stderr
    assert "admin:***@127.0.0.1" in out, out
    assert PASSWORD not in out
