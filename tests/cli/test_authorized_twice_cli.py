"""26th pass M2: ``--url http://u:pw@HOST`` with ``--header Authorization:…`` ended in "no answer:
ValueError: Cannot combine AUTHORIZATION header with AUTH argument…", exit 1, as if the server
had not answered: the two are refused up front (exit 2, the password never quoted), before any
request, on ``bench`` and ``soak``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.urls import authorized_twice
from tests.support import run_cli


@pytest.mark.parametrize("command", ["bench", "soak"])
def test_credentials_in_the_url_and_an_authorization_header_are_refused(
    command: str, tmp_path: Path
) -> None:
    url = "http://u:pw-secret@127.0.0.1:9/v1"  # nothing listens: refused before any request
    for extra in ([], ["--json"]):
        done = run_cli(command, "--url", url, "--header", "authorization: Bearer X",
                       "--ledger", str(tmp_path / "l.db"), *extra, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        said = json.loads(done.stdout)["error"] if extra else done.stderr
        assert "--url carries credentials" in said and "Authorization" in said, said
        assert "pw-secret" not in done.stdout + done.stderr and "no answer" not in said
    assert not (tmp_path / "l.db").exists()


def test_authorized_twice_needs_both() -> None:
    auth = [("Authorization", "Bearer X")]
    assert authorized_twice("http://u:p@h/v1", auth)
    assert authorized_twice("http://u@h:1/v1", [(" AUTHORIZATION ", "x")])
    assert not authorized_twice("http://h/v1", auth)
    assert not authorized_twice("http://u:p@h/v1", [("X-Api-Key", "k")])
    assert not authorized_twice("http://h/v1?next=a@b", auth)  # an @ after the host is no user
