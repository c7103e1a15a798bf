"""A bad spec: one clear message naming the file and field path, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import run_cli

GOOD = """
[services.w]
role = "generic"
url = "http://127.0.0.1:{port}"
start = "python -m http.server {port} --bind 127.0.0.1"
env_file = "env/w.env"
"""

BAD = {
    "unknown key": (GOOD + 'colour = "red"\n', "services.w.colour", "unknown key"),
    "wrong type": (GOOD + 'ready_timeout_s = "soon"\n', "services.w.ready_timeout_s", "number"),
    "cycle": (
        GOOD + 'depends_on = ["v"]\n[services.v]\nrole = "generic"\nurl = "http://127.0.0.1:2"\n'
        'start = "true"\ndepends_on = ["w"]\n',
        "services.w.depends_on",
        "dependency cycle: w -> v -> w",
    ),
    "duplicate port": (
        GOOD + '[services.v]\nrole = "generic"\nurl = "http://127.0.0.1:{port}"\nstart = "true"\n',
        "services.v.url",
        "already used by services.w.url",
    ),
    "missing env dir": (
        GOOD.replace("env/w.env", "nowhere/w.env"),
        "services.w.env_file",
        "nowhere",
    ),
    "no services": ('name = "x"\n', "services", "missing table [services]"),
    "not toml": ("[services\n", "", "not valid TOML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_spec_is_named_exits_2_and_starts_nothing(case: str, tmp_path: Path) -> None:
    text, field, words = BAD[case]
    (tmp_path / "env").mkdir()
    spec = tmp_path / "servelab.toml"
    spec.write_text(text.replace("{port}", "18999"), encoding="utf-8")
    result = run_cli("up", cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stderr
    first_line = result.stderr.strip().splitlines()[0]
    assert f"{spec}: {field}" in first_line if field else str(spec) in first_line
    assert words in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / ".servelab").exists(), "nothing may be started or written"
