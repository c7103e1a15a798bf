"""What an interrupted put-back says still runs (:func:`servelab.ops.deploy.putback.still_live`)
on a real router: sglang-router writes ``sglang::router`` over its command line, so a ``--policy``
not found there was said "router: still running --policy=unset" (22nd pass), a value never read.
Now the value is the one the router reports it routes with, and before it reports one the line
says it was not read back. The real 2P2D stack: two simulated prefills and decodes, the real
router, its policy in ``ROUTER_ARGS`` (``cache_aware``)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path

import pytest

from servelab.core.deploy.putback import PutBack, StillLive
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.context import operation
from servelab.ops.deploy.putback import still_live
from servelab.ops.knob import set_knob
from servelab.report.putback import render_put_back
from tests.support.deployed import deployed
from tests.support.xpyd import write_2p2d_spec

POLICY = "--policy"


def _still(loaded: LoadedSpec) -> list[StillLive]:
    async def read() -> list[StillLive]:
        async with operation(loaded) as op:
            return await still_live(op, "router")

    return asyncio.run(read())


def _route_one(loaded: LoadedSpec) -> None:
    """One completion through the router (it reports its policy once it has routed one)."""
    body = json.dumps({"model": "sim", "prompt": "hello", "max_tokens": 2}).encode()
    url = loaded.spec.services["router"].url.rstrip("/") + "/v1/completions"
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200


@pytest.mark.timeout(300)
def test_a_router_whose_argv_is_written_over_is_never_said_to_run_a_value_not_read(
    tmp_path: Path,
) -> None:
    loaded = load_spec(write_2p2d_spec(tmp_path)[0])
    with deployed(loaded):
        # before it has routed a request its policy is read nowhere: said so, never "unset"
        still = _still(loaded)
        assert still == [StillLive("router", POLICY, None, "cache_aware", read=False)], still
        text = render_put_back(PutBack(interrupted=True, still_live=tuple(still)))
        assert "router: --policy not read back (its process hides it" in text, text
        assert "still running" not in text and "=unset" not in text, text
        # once it has, it is read from its report: as its file says, nothing still live
        _route_one(loaded)
        assert _still(loaded) == []
        # its file changed, not restarted: it runs cache_aware, as it reports
        asyncio.run(set_knob(loaded, "router", POLICY, "round_robin"))
        still = _still(loaded)
        assert still == [StillLive("router", POLICY, "cache_aware", "round_robin")], still
        text = render_put_back(PutBack(interrupted=True, still_live=tuple(still)))
        assert "router: still running --policy=cache_aware (file: round_robin)" in text
        assert "=unset" not in text
