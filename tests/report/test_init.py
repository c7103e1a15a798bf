"""The spec ``servelab init`` writes, from an InitResult: every shape parses as a spec (a systemd
unit with its env file and arguments variable, an SSH host, a stub start for a process not
found), and every gap is said above its service."""

from __future__ import annotations

from servelab.core.deploy.routers import RouterKind
from servelab.core.deploy.spec import parse_spec
from servelab.core.init.contract import FoundHost, FoundService, Gap, GapCode, InitResult, StartFact
from servelab.report.init import gap_words, init_note, spec_toml

_EXEC = "/usr/bin/python3 -m sglang.launch_server $SGLANG_ARGS"
_UNIT = StartFact(unit="sglang-decode.service", exec_start=_EXEC,
                  env_file="/etc/sglang/decode.env", args_env="SGLANG_ARGS", pid=42)  # fmt: skip


def _result() -> InitResult:
    services = (
        FoundService("prefill", "prefill", "http://127.0.0.1:30000", "gpu", 8998,
                     StartFact(), "deepseek-ai/DeepSeek-V3", "0.5.4"),
        FoundService("decode", "decode", "http://127.0.0.1:30002", "gpu", None, _UNIT,
                     depends_on=("prefill",)),
        FoundService("router", "router", "http://127.0.0.1:30001", "gpu", None, StartFact(pid=7),
                     depends_on=("prefill", "decode")),
    )  # fmt: skip
    gaps = (Gap("prefill", GapCode.NO_PROCESS, "port 30000 on gpu"),
            Gap("router", GapCode.ARGV_REWRITTEN, "smg::router"),
            Gap(None, GapCode.NO_MODEL, "http://127.0.0.1:30001/v1/models"))  # fmt: skip
    hosts = (FoundHost("local"), FoundHost("gpu", "ops@gpu-node-1", 2222, "~/.ssh/id"))
    return InitResult("pd", "sglang", RouterKind.SMG, None, hosts, services, gaps, 29000)


def test_the_spec_parses_and_keeps_what_was_found() -> None:
    text = spec_toml(_result(), "http://127.0.0.1:30001")
    spec = parse_spec(text)
    assert spec.hosts["gpu"].ssh == "ops@gpu-node-1" and spec.hosts["gpu"].port == 2222
    decode = spec.services["decode"]
    assert (decode.unit, decode.env_file, decode.args_env) == (
        "sglang-decode.service", "/etc/sglang/decode.env", "SGLANG_ARGS")  # fmt: skip
    assert decode.start == "sudo systemctl restart sglang-decode.service" and decode.host == "gpu"
    assert "# ExecStart: /usr/bin/python3 -m sglang.launch_server $SGLANG_ARGS" in text
    prefill = spec.services["prefill"]
    assert prefill.bootstrap_port == 8998 and "exit 1" in prefill.start  # a stub that fails
    assert spec.services["router"].start == "router"
    assert spec.router.kind == "smg" and spec.services["router"].router is not None
    assert spec.services["router"].router.prometheus_port == 29000
    assert "# engine reports: model deepseek-ai/DeepSeek-V3, version 0.5.4" in text


def test_every_gap_is_said_in_the_spec_and_the_note() -> None:
    result = _result()
    text = spec_toml(result, "http://127.0.0.1:30001")
    note = init_note(result, "out.toml")
    for gap in result.gaps:
        assert gap_words(gap) in text and gap_words(gap) in note
    assert "# prefill: no process found listening (port 30000 on gpu)" in text
    for code in GapCode:  # each code has words (assert_never keeps it so for mypy)
        assert gap_words(Gap("x", code, "d"))


def test_the_header_comment_says_the_router_url_masked_on_one_line() -> None:
    """Issue 38 (M4): the comment quoted ``--router`` as typed, a password and all (the CLI now
    refuses such a URL; the comment masks whatever reaches it, and a newline cannot end it)."""
    text = spec_toml(_result(), 'http://ops:Pw9secretXYZ@127.0.0.1:30001/\nstart = "x"')
    assert "Pw9secretXYZ" not in text
    assert "# Written by `servelab init --router http://ops:***@127.0.0.1:30001/ start" in text
    assert parse_spec(text).services["router"].start == "router"
