"""``knob set router RUST_LOG=…`` back to the value the running router was started with (the
copy of its env file servelab kept when it launched it, ``ops/sharedfile.env_at_launch``) is
live: no restart needed (the twenty-ninth hostile pass's low: it said "restart needed: not read
back"). Another value is still not read back, restart needed. Real processes: the simulated
workers, the real sglang-router 0.3.2, whose environment reads blank (written over)."""

from __future__ import annotations

import json
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


def _set(root: Path, value: str) -> dict[str, object]:
    code, out, err = servelab_in(root, "knob", "set", "router", f"RUST_LOG={value}", "--json")
    assert code == 0, out + err
    change: dict[str, object] = json.loads(out)
    assert change["changed"] is True, change
    return change


def test_knob_set_back_to_the_launch_copy_s_value_needs_no_restart(root: Path) -> None:
    pid = json.loads((root / "state" / "run" / "router.json").read_text())["pid"]
    assert Path(f"/proc/{pid}/environ").read_bytes().strip(b"\0") == b""  # written over
    away = _set(root, "debug")  # another value than the router runs: as before
    assert away["restart_needed"] is True and away["live_read"] is False, away
    back = _set(root, "info")
    assert back["restart_needed"] is False, back
    assert (back["live"], back["live_read"], back.get("launched")) == ("info", True, True), back
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=debug")
    assert code == 0 and "restart needed" in out and "not read back" in out, out + err
    code, out, err = servelab_in(root, "knob", "set", "router", "RUST_LOG=info")
    assert code == 0, out + err
    assert "restart needed:" not in out and "not read back" not in out, out
    assert "router already runs with this value" in out and "launched" in out, out
    assert "no restart needed" in out, out
