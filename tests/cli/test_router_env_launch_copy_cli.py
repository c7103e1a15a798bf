"""A router's env knob is read from the copy of its env file servelab kept when it launched it
(its pid record's ``env_at_launch``) when its environment reads blank (the twenty-fifth pass,
issue 38): ``knob set router RUST_LOG=debug`` then ``verify`` said "not read back … verify PASS"
though servelab's own record showed the router runs ``info``; ``ab --knob router:RUST_LOG=…``
ended "live value None"; and ``knob set router RUST_LOG=…`` back to the value the router was
started with is live, no restart needed (the twenty-ninth pass's low: it said "restart needed: not
read back"). Real processes: the simulated workers, the real sglang-router 0.3.2."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.generic import servelab_in, up_in
from tests.support.specs import PdPorts, write_pd_spec


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    spec = write_pd_spec(tmp_path, ports=PdPorts.free(proxy=False))
    text = spec.read_text()
    router = 'depends_on = ["prefill", "decode"]\n'
    assert router in text
    spec.write_text(text.replace(router, 'knobs = ["RUST_LOG"]\n' + router))
    (tmp_path / "env" / "router.env").write_text("RUST_LOG=info\n")
    with up_in(tmp_path):
        yield tmp_path


def _rust_log(root: Path) -> tuple[int, dict[str, object]]:
    code, out, err = servelab_in(root, "verify", "--json")
    checks = [c for c in json.loads(out)["checks"]
              if c["service"] == "router" and c["code"].startswith("live.")
              and c.get("knob") == "RUST_LOG"]  # fmt: skip
    assert len(checks) == 1, out + err
    return code, checks[0]


def test_verify_fails_a_router_knob_its_launch_copy_shows_not_live(root: Path) -> None:
    pid = json.loads((root / "state" / "run" / "router.json").read_text())["pid"]
    assert Path(f"/proc/{pid}/environ").read_bytes().strip(b"\0") == b""  # written over
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=debug")
    assert code == 0, out + err
    code, check = _rust_log(root)
    assert code != 0 and check["result"] == "fail", check
    assert check["code"] == "live.differs" and check["live"] == "info", check
    detail = str(check["detail"])
    assert "differs: file debug, live info (restart needed)" in detail, detail
    assert "launched" in detail, detail
    code, out, _ = servelab_in(root, "verify")
    assert code != 0 and "verify PASS" not in out and "not read back" not in out, out
    # the file back at the launch copy's value: it cannot be proved live, nothing says it is not
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=info")
    assert code == 0, out + err
    code, check = _rust_log(root)
    assert code == 0 and check["code"] == "live.not_read_back", check
    assert check["result"] == "skip", check


def test_ab_on_a_router_env_knob_proves_each_arm_from_its_launch_copy(root: Path) -> None:
    code, out, err = servelab_in(root, "ab", "--knob", "router:RUST_LOG=info,debug",
                                 "--concurrency", "4", "--requests", "8")  # fmt: skip
    assert "None" not in out + err, out + err
    assert "is not live" not in out + err, out + err
    assert code == 0, out + err


def test_a_launch_copy_that_cannot_be_read_leaves_the_knob_not_read_back(root: Path) -> None:
    """A copy replaced by a FIFO (never waited on), a UTF-16 file (refused), binary bytes, or
    removed: nothing is known from it, the knob is "not read back" as before, never an error."""
    record = json.loads((root / "state" / "run" / "router.json").read_text())
    copy = Path(record["extra"]["env_at_launch"])
    assert copy.read_text() == "RUST_LOG=info\n"
    hostile = {
        "fifo": lambda: os.mkfifo(copy),
        "utf-16": lambda: copy.write_bytes("RUST_LOG=debug\n".encode("utf-16")),
        "binary": lambda: copy.write_bytes(b"\x00\xff\x1b[31m" * 1000),
        "gone": lambda: None,
    }
    for kind, make in hostile.items():
        copy.unlink()
        make()
        code, check = _rust_log(root)
        assert code == 0 and check["code"] == "live.not_read_back", (kind, check)


def test_knob_diff_reads_a_router_knob_from_its_launch_copy_as_verify_does(root: Path) -> None:
    """The twenty-eighth pass (L3): after ``knob set router RUST_LOG=debug``, ``knob diff`` said
    "live not read back … restart it to be sure" while ``verify`` said "differs: file debug,
    live info (restart needed)": the diff reads the launch copy too, and says so."""
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=debug")
    assert code == 0, out + err
    code, out, err = servelab_in(root, "knob", "diff", "router", "RUST_LOG", "--json")
    assert code == 0, out + err
    diff = json.loads(out)
    assert diff["file"] == "debug" and diff["live"] == "info", diff
    assert diff["live_read"] is True and diff["launched"] is True, diff
    assert diff["verdict"] == "differs", diff
    code, out, err = servelab_in(root, "knob", "diff", "router", "RUST_LOG")
    assert code == 0, out + err
    assert "not read back" not in out and "restart it to be sure" not in out, out
    assert "verdict: differs: restart needed" in out, out
    assert "copied when it launched it" in out, out
    # the file back at the launch copy's value: not proved live, as verify says
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=info")
    assert code == 0, out + err
    code, out, err = servelab_in(root, "knob", "diff", "router", "RUST_LOG", "--json")
    diff = json.loads(out)
    assert diff["live"] is None and diff["live_read"] is False and diff["verdict"] is None, diff
    assert "launched" not in diff, diff


def _set_rust_log(root: Path, value: str) -> dict[str, object]:
    code, out, err = servelab_in(root, "knob", "set", "router", f"RUST_LOG={value}", "--json")
    assert code == 0, out + err
    change: dict[str, object] = json.loads(out)
    assert change["changed"] is True, change
    return change


def test_knob_set_back_to_the_launch_copy_s_value_needs_no_restart(root: Path) -> None:
    pid = json.loads((root / "state" / "run" / "router.json").read_text())["pid"]
    assert Path(f"/proc/{pid}/environ").read_bytes().strip(b"\0") == b""  # written over
    away = _set_rust_log(root, "debug")  # another value than the router runs: as before
    assert away["restart_needed"] is True and away["live_read"] is False, away
    back = _set_rust_log(root, "info")
    assert back["restart_needed"] is False, back
    assert (back["live"], back["live_read"], back.get("launched")) == ("info", True, True), back
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=debug")
    assert code == 0 and "restart needed" in out and "not read back" in out, out + err
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=info")
    assert code == 0, out + err
    assert "restart needed:" not in out and "not read back" not in out, out
    assert "router already runs with this value" in out and "launched" in out, out
    assert "no restart needed" in out, out
