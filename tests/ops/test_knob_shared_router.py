"""``knob set`` on a file a router reads too (issue 38): the router is named as needing the
restart, and its value, which cannot be read (sglang-router writes ``sglang::router`` over its
command line and environment), is said "not read back", as the put-back says it
(``ops/deploy/putback.py`` ``still_live``), never "runs with (unset)", a value never read. The
real 2P2D stack: decode-1 reads the router's env file (the decode's own variables copied into
it), the real sglang-router, the simulated workers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from servelab.io.specfile import load_spec
from servelab.ops.knob import set_knob
from servelab.report.knob import render_knob_change
from tests.support.deployed import deployed
from tests.support.xpyd import write_2p2d_spec

KNOB = "SGLANG_SM120_MMA_TARGET_CTAS"


@pytest.mark.timeout(300)
def test_a_router_reading_the_file_is_never_said_to_run_a_value_not_read(tmp_path: Path) -> None:
    spec_path, _ = write_2p2d_spec(tmp_path)
    text = spec_path.read_text()
    mine = 'env_file = "env/decode.env"'
    assert text.count(mine) == 1
    spec_path.write_text(text.replace(mine, 'env_file = "env/router-2p2d.env"'))
    env = tmp_path / "env"
    router_env = env / "router-2p2d.env"
    router_env.write_text(router_env.read_text() + (env / "decode.env").read_text())
    loaded = load_spec(spec_path)
    with deployed(loaded):
        change = asyncio.run(set_knob(loaded, "decode-1", KNOB, "384"))
        assert change.changed and change.restart_needed, change
        assert change.shared == (("router", None),), change.shared
        assert change.shared_unread == ("router",), change
        text = render_knob_change(change, loaded.spec_args)
        said = f"  router reads the same file and its {KNOB} not read back: `servelab restart "
        assert said in text, text
        assert "(unset)" not in text, text
        assert f"{KNOB}=384" in router_env.read_text()
