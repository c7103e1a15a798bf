"""``servelab init --router`` with a credential in the URL (issue 38, M4): init would write it
into the spec (its header comment and the router's ``url``), so it is refused before anything is
read or written, exit 2, the URL quoted masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import free_port, run_cli

PASSWORD = "Pw9secretXYZ"


@pytest.mark.parametrize(
    "url",
    [f"http://ops:{PASSWORD}@127.0.0.1:{{port}}", f"http://127.0.0.1:{{port}}/?token={PASSWORD}"],
)
def test_a_router_url_with_a_credential_is_refused_masked(tmp_path: Path, url: str) -> None:
    spec = tmp_path / "s.toml"
    done = run_cli("init", "--router", url.format(port=free_port()), "-o", str(spec), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds a credential, which init would write into the spec" in done.stderr
    assert "***" in done.stderr and PASSWORD not in done.stdout + done.stderr
    assert not spec.exists() and list(tmp_path.iterdir()) == []
