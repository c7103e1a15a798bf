"""Secret-shaped values typed where no secret-looking name guards them are never stored nor shown
(issue 38, third pass, item 1): a trace whose ``session_id`` is an ``sk-...`` key replayed by
``bench --trace``, and ``knob set`` of an ordinary knob to an ``sk-``/``hf_``/``ghp_``/``AKIA``
token or a URL with a password. The engine still gets the real value (the env file holds it); the
``--json``, stdout, stderr, the ledger's bytes and ``ledger export`` hold the mask. Real
processes, a real router and simulated workers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import run_cli
from tests.support.specs import PdPorts, write_pd_spec
from tests.support.stack import SimStack, sim_stack

SESSION_SECRET = "sk-trace0session0SECRET0abcdef0123456789"
KNOB = "MY_UPSTREAM"
KNOB_SECRETS = [
    "sk-knob0SECRET0abcdef0123456789",
    "hf_knobSECRETabcdef0123456789",
    "ghp_knobSECRETabcdef0123456789AB",
    "AKIAKNOBSECRET012345",
    "https://user:urlPASSWORD0123@example.invalid/v1",
]


def _ledger_bytes(ledger: Path) -> bytes:
    return b"".join(p.read_bytes() for p in ledger.parent.glob(ledger.name + "*"))


def _assert_absent(secret: str, *texts: str | bytes) -> None:
    for text in texts:
        data = text.encode() if isinstance(text, str) else text
        assert secret.encode() not in data, data[:2000]


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.02, env={"SERVELAB_SIM_WARMUP_S": "0"}) as st:
        yield st


def test_a_trace_session_id_of_a_secret_shape_is_masked(stack: SimStack, tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    lines = [
        {"timestamp": 0, "input_length": 64, "output_length": 4, "hash_ids": [1],
         "session_id": SESSION_SECRET},
        {"delay": 1, "input_length": 96, "output_length": 4, "hash_ids": [1, 2],
         "session_id": SESSION_SECRET},
        {"timestamp": 1, "input_length": 64, "output_length": 4, "hash_ids": [3],
         "session_id": "plain-one"},
    ]  # fmt: skip
    trace.write_text("".join(json.dumps(line) + "\n" for line in lines))
    ledger = tmp_path / "ledger.db"
    done = run_cli("bench", "--url", stack.router_url, "--trace", str(trace), "--ledger",
                   str(ledger), "--json", timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    names = json.dumps(doc)
    assert "plain-one" in names  # the ordinary id is kept, as the test of the policy's reach
    assert "***" in names
    exported = run_cli("ledger", "export", "--ledger", str(ledger), "--json")
    assert exported.returncode == 0, exported.stderr
    assert "plain-one" in exported.stdout
    _assert_absent(SESSION_SECRET, done.stdout, done.stderr, exported.stdout, exported.stderr,
                   _ledger_bytes(ledger))  # fmt: skip


@pytest.mark.parametrize("secret", KNOB_SECRETS, ids=["sk", "hf", "ghp", "akia", "url"])
def test_knob_set_of_a_secret_shaped_value_is_set_but_never_shown(
    tmp_path: Path, secret: str
) -> None:
    spec = write_pd_spec(tmp_path, ports=PdPorts.free(proxy=False), knobs=(KNOB,), knob=None)
    ledger = tmp_path / "ledger.db"
    env = {"SERVELAB_LEDGER": str(ledger)}
    done = run_cli("knob", "set", "decode", f"{KNOB}={secret}", "-f", str(spec), "--json",
                   env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{KNOB}={secret}" in (tmp_path / "env" / "decode.env").read_text()  # set as typed
    outputs = [done.stdout, done.stderr]
    for args in (["knob", "get", "decode", KNOB], ["knob", "diff", "decode", KNOB]):
        for extra in ([], ["--json"]):
            shown = run_cli(*args, "-f", str(spec), *extra, env=env)
            assert shown.returncode == 0, shown.stderr
            outputs += [shown.stdout, shown.stderr]
    exported = run_cli("ledger", "export", "--json", env=env)
    assert exported.returncode == 0, exported.stderr
    assert KNOB in exported.stdout
    _assert_absent(secret, *outputs, exported.stdout, exported.stderr, _ledger_bytes(ledger))


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
GITLAB = "glpat-AbCdEfGhIjKlMnOpQrSt12"
BEARER = "opaque0token0abc123DEF456"


def test_jwts_gitlab_tokens_and_bearer_tokens_under_ordinary_headers_are_masked(
    stack: SimStack, tmp_path: Path
) -> None:
    """Item 4: a JWT, a GitLab token and a bare ``Bearer X`` passed the policy whole; under a
    header of an ordinary name, ``bench --header`` stored and showed them."""
    ledger = tmp_path / "ledger.db"
    done = run_cli("bench", "--url", stack.router_url, "--requests", "2", "--concurrency", "1",
                   "--input-len", "16", "--output-len", "2", "--warmup", "0",
                   "--header", f"X-Upstream:Bearer {BEARER}", "--header", f"X-Id:{JWT}",
                   "--header", f"X-Gl:{GITLAB}", "--ledger", str(ledger), "--json",
                   timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # a vendor's header is stored as a secret whole (the thirteenth pass): its name kept
    assert ["X-Upstream", "***"] in json.loads(done.stdout)["config"]["headers"]
    exported = run_cli("ledger", "export", "--ledger", str(ledger), "--json")
    assert exported.returncode == 0, exported.stderr
    for secret in (JWT, GITLAB, BEARER):
        _assert_absent(secret, done.stdout, done.stderr, exported.stdout, _ledger_bytes(ledger))


VENDOR_HEADERS = {"X-Honeycomb-Team": "hcPLANTaaaa1111bbbb2222", "Pwd": "hunterPWDplain77",
                  "X-Psk": "Zq27xPSKplain0042", "Digest": "digestPLAIN0091"}  # fmt: skip


def test_a_vendors_header_value_is_never_stored_nor_shown(stack: SimStack, tmp_path: Path) -> None:
    """The thirteenth pass (issue 38, high): ``bench``/``soak --header`` stored values under
    names no secret list knew (``X-Honeycomb-Team``, ``Pwd``, ``X-Psk``, ``Digest``) in
    ``--json`` and the ledger; a value is now kept only under a standard plain header
    (``Accept``)."""
    ledger = tmp_path / "ledger.db"
    headers = [a for name, value in VENDOR_HEADERS.items() for a in ("--header", f"{name}:{value}")]
    headers += ["--header", "Accept:text/event-stream"]
    bench = run_cli("bench", "--url", stack.router_url, "--requests", "2", "--concurrency", "1",
                    "--input-len", "16", "--output-len", "2", "--warmup", "0", *headers,
                    "--ledger", str(ledger), "--json", timeout=300)  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    assert ["Accept", "text/event-stream"] in json.loads(bench.stdout)["config"]["headers"]
    soak = run_cli("soak", "--url", stack.router_url, "--sessions", "1", "--rounds", "1",
                   "--idle-timeout", "3", "--duration", "30", "--no-localize", *headers,
                   "--ledger", str(ledger), "--json", timeout=300)  # fmt: skip
    assert soak.returncode == 0, soak.stderr
    stored = json.loads(soak.stdout)["config"]["headers"]
    assert ["Pwd", "***"] in stored and ["Accept", "text/event-stream"] in stored
    exported = run_cli("ledger", "export", "--ledger", str(ledger), "--json")
    assert exported.returncode == 0, exported.stderr
    for secret in VENDOR_HEADERS.values():
        _assert_absent(secret, bench.stdout, bench.stderr, soak.stdout, soak.stderr,
                       exported.stdout, _ledger_bytes(ledger))  # fmt: skip
