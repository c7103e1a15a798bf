"""Every option that takes a server's URL reads it with the one parser (``core/urls.py``) and
refuses a malformed one before anything runs (issue 38, fourteenth pass): exit 2, the option
named, the value quoted (its password masked), with ``--json`` the JSON error document too.
``init --router 'http://[::1'`` and ``soak --router-metrics-url 'http://[::1'`` (and a port
99999) once ended in exit 1 "unexpected ValueError"; ``soak --router-url ftp://x`` ran the soak
first; ``--router-metrics-url garbage`` was taken silently; ``bench --url 'http://h:1/?x=1'``
asked ``http://h:1/?x=1/v1/models``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import free_port, run_cli

SECRET = "sk-secret"
#: option -> the command line before the value (a closed loopback port where a URL is needed)
OPTIONS = {
    "--router": ("init", "-o", "s.toml", "--router"),
    "--router-url": ("soak", "--no-ledger", "--url", "http://127.0.0.1:{port}", "--router-url"),
    "--router-metrics-url": (
        "soak", "--no-ledger", "--url", "http://127.0.0.1:{port}", "--router-metrics-url",
    ),
    "--url": ("bench", "--no-ledger", "--url"),
    "--upstream": ("sim", "proxy", "--port", "{port}", "--upstream"),
}  # fmt: skip
#: value -> what the error says of it
MALFORMED = {
    "http://[::1": "bracket is never closed",
    "http://127.0.0.1:99999": "a port from 1 to 65535",
    "http://127.0.0.1:0": "a port from 1 to 65535",
    "ftp://x": "not ftp://",
    "garbage": "http://HOST[:PORT][/PATH]",
    "": "got an empty value",
    "http://h:1/?x=1": "no query",
    f"http://u:{SECRET}@[::1": "bracket is never closed",
}


def _argv(option: str, value: str) -> list[str]:
    port = str(free_port())
    return [word.format(port=port) for word in OPTIONS[option]] + [value]


@pytest.mark.parametrize("value", MALFORMED)
@pytest.mark.parametrize("option", OPTIONS)
def test_a_malformed_url_is_a_usage_error_naming_the_option(
    tmp_path: Path, option: str, value: str
) -> None:
    done = run_cli(*_argv(option, value), cwd=tmp_path, timeout=60)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert f"Invalid value for '{option}'" in done.stderr, said
    credential = option == "--router" and SECRET in value  # init refuses a credential first
    assert (MALFORMED[value], "holds a credential")[credential] in done.stderr, said
    assert SECRET not in said and "unexpected" not in said and "Traceback" not in said
    if SECRET in value:
        assert "u:***@[::1" in done.stderr, said
    elif value:
        assert repr(value) in done.stderr, said
    assert list(tmp_path.iterdir()) == []  # nothing written: no spec, no ledger


@pytest.mark.parametrize("option", ["--router", "--router-url", "--router-metrics-url", "--url"])
def test_with_json_the_refusal_is_the_json_error_document(tmp_path: Path, option: str) -> None:
    argv = _argv(option, "http://[::1")
    done = run_cli(argv[0], "--json", *argv[1:], cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["exit_code"] == 2, doc
    assert f"'{option}'" in doc["error"] and "'http://[::1'" in doc["error"], doc


@pytest.mark.parametrize("option", ["--router-url", "--router-metrics-url", "--url"])
def test_a_password_in_a_taken_url_is_never_printed(tmp_path: Path, option: str) -> None:
    """A well-formed URL with a password is taken (Basic auth); the run fails (nothing listens)
    and what it says masks the password."""
    port = free_port()
    done = run_cli(*_argv(option, f"http://u:{SECRET}@127.0.0.1:{port}"), cwd=tmp_path,
                   timeout=60)  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1 and said.strip(), said
    assert SECRET not in said and "Traceback" not in said, said


def test_init_refuses_a_router_url_with_a_password_masked(tmp_path: Path) -> None:
    done = run_cli(*_argv("--router", f"http://u:{SECRET}@127.0.0.1:1"), cwd=tmp_path)
    assert done.returncode == 2 and "holds a credential" in done.stderr, done.stderr
    assert SECRET not in done.stdout + done.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("value", "said"),
    [("http://[::1", "bracket is never closed"), ("http://127.0.0.1:99999", "1 to 65535"),
     (f"http://u:{SECRET}@[::1", "u:***@[::1")],
)  # fmt: skip
def test_a_malformed_proxy_is_a_usage_error(tmp_path: Path, value: str, said: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = run_cli("bench", "--no-ledger", "--url", url, "--proxy", value, cwd=tmp_path)
    assert done.returncode == 2 and "Invalid value for '--proxy'" in done.stderr, done.stderr
    assert said in done.stderr and SECRET not in done.stdout + done.stderr
