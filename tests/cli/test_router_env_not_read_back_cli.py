"""A router whose env file holds an allow-listed name (``SERVELAB_SIM_TIME_SCALE``) is verified as
"not read back", never "in file but not live: restart needed" (issue 38, M2): sglang-router writes
its process title (``sglang::router``) over its argv and environment, so ``/proc/PID/environ``
reads blank; ``restart router`` failed its verification though the router served. A value that
cannot be read is never a FAILED verdict. Real processes: the simulated workers, the real
sglang-router 0.3.2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.generic import servelab_in, up_in
from tests.support.specs import PdPorts, write_pd_spec


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    write_pd_spec(tmp_path, ports=PdPorts.free(proxy=False))
    (tmp_path / "env" / "router.env").write_text("SERVELAB_SIM_TIME_SCALE=0.25\n")
    with up_in(tmp_path):
        yield tmp_path


def test_restart_router_says_not_read_back_and_passes(root: Path) -> None:
    pid = json.loads((root / "state" / "run" / "router.json").read_text())["pid"]
    assert Path(f"/proc/{pid}/environ").read_bytes().strip(b"\0") == b""  # written over
    code, out, err = servelab_in(root, "restart", "router")
    assert "in file but not live" not in out, out
    assert code == 0, out + err
    assert "restart: ok" in out
    code, out, err = servelab_in(root, "verify", "--json")
    assert code == 0, out + err
    live = [c for c in json.loads(out)["checks"]
            if c["service"] == "router" and c["code"].startswith("live.")
            and c.get("knob") == "SERVELAB_SIM_TIME_SCALE"]  # fmt: skip
    assert [c["code"] for c in live] == ["live.not_read_back"], live
    assert live[0]["result"] == "skip" and "not read back (file 0.25)" in live[0]["detail"]


def test_knob_set_and_diff_on_the_routers_own_env_knob_say_not_read_back(root: Path) -> None:
    """The twenty-fourth pass: ``knob set router --unset NAME`` said "already runs with this
    value; no restart needed" (its blank environment read as "unset"), ``knob diff`` said live
    "(unset)": the router's value is not read back, and a restart is needed unless proven not."""
    name = "SERVELAB_SIM_TIME_SCALE"
    code, out, err = servelab_in(root, "knob", "diff", "router", name)
    assert code == 0, out + err
    assert "(unset)" not in out and "not read back" in out, out
    assert "in file but not live" not in out, out
    code, out, err = servelab_in(root, "knob", "diff", "router", name, "--json")
    assert code == 0, out + err
    diff = json.loads(out)
    assert diff["live"] is None and diff["live_read"] is False and diff["verdict"] is None, diff
    code, out, err = servelab_in(root, "knob", "set", "router", name, "--unset")
    assert code == 0, out + err
    assert "no restart needed" not in out and "already runs" not in out, out
    assert f"router's {name} not read back" in out and "restart router" in out, out
    code, out, err = servelab_in(root, "knob", "set", "router", f"{name}=0.25", "--json")
    assert code == 0, out + err
    change = json.loads(out)
    # back to the value the router was started with (the copy of its env file servelab kept when
    # it launched it holds 0.25): live, no restart (the twenty-ninth pass's low); another value
    # is not read back, as above
    assert change["restart_needed"] is False and change["live_read"] is True, change
    assert (change["live"], change["launched"]) == ("0.25", True), change
    code, out, err = servelab_in(root, "knob", "set", "router", f"{name}=0.5", "--json")
    assert code == 0, out + err
    change = json.loads(out)
    assert change["restart_needed"] is True and change["live_read"] is False, change
    assert change["live"] is None and "launched" not in change, change
