"""No command prints a URL's password (issue 38, nineteenth pass, item 1): ``bench --url
http://admin:PASSWORD@...`` once printed the title ``bench http://admin:PASSWORD@...`` and ``soak``
``soak OK: ... via http://admin:PASSWORD@...``; from a spec whose router URL holds a password,
``bench -f`` printed it in its title and ``soak -f`` once masked, once in clear. Every command that
takes ``--url`` or reads a spec URL, in text and with ``--json``, against a real simulated stack
(the router ignores the Basic credentials, so the runs succeed and print all they print)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.specs import PdPorts, pd_spec_toml
from tests.support.stack import SimStack, sim_stack

PASSWORD = "Pz7Kq2Lm9Xw4A"
SHORT = ("--concurrency", "1", "--requests", "1")
ROUNDS = ("--sessions", "1", "--rounds", "1")


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05) as st:
        yield st


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://admin:{PASSWORD}@", 1)


def _said(tmp: Path, *argv: str, as_json: bool) -> str:
    argv = (argv[0], "--json", *argv[1:]) if as_json else argv
    done = run_cli(*argv, cwd=tmp, timeout=180)
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    return said


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(
    "argv",
    [("bench", *SHORT, "--no-ledger"), ("soak", *ROUNDS, "--no-ledger")],
    ids=["bench", "soak"],
)
def test_a_password_in_url_is_never_printed(
    stack: SimStack, tmp_path: Path, argv: tuple[str, ...], as_json: bool
) -> None:
    url = _with_password(stack.router_url)
    said = _said(tmp_path, *argv, "--url", url, as_json=as_json)
    assert PASSWORD not in said, said
    assert f"admin:***@127.0.0.1:{stack.router_port}" in said, said  # the URL shown, masked


#: a command reading the spec -> its arguments
SPEC_COMMANDS = {
    "bench": ("bench", *SHORT, "--no-ledger"),
    "soak": ("soak", *ROUNDS, "--no-ledger"),
    "status": ("status",),
    "verify": ("verify",),
}


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("command", SPEC_COMMANDS)
def test_a_password_in_a_spec_url_is_never_printed(
    stack: SimStack, tmp_path: Path, command: str, as_json: bool
) -> None:
    text = pd_spec_toml(PdPorts.of(stack), env_dir=None, knobs=())
    router = f'url = "http://127.0.0.1:{stack.router_port}"'
    assert router in text
    text = text.replace(router, f'url = "{_with_password(stack.router_url)}"')
    (tmp_path / "servelab.toml").write_text(text, encoding="utf-8")
    said = _said(tmp_path, *SPEC_COMMANDS[command], as_json=as_json)
    assert PASSWORD not in said, said
    if command != "verify":  # verify names the router by its service name
        assert "admin:***@" in said, said  # shown, masked (a table's cell may cut the rest)
