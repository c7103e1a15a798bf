"""A deployment up for a test's block and down after it: the `up`/`down` pair every stack fixture
of the CLI tests wrote for itself (real processes through ops/deploy, as ``servelab up`` does); and
the knob a module's shared deployment must have live between its tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

from servelab.core.ledger.codec import encode
from servelab.io.specfile import LoadedSpec
from servelab.ops.deploy import deploy
from servelab.ops.knob import diff_knob, set_knob

__all__ = ["deployed", "knob_live"]


@contextlib.contextmanager
def deployed(loaded: LoadedSpec) -> Iterator[LoadedSpec]:
    """``loaded`` brought up for the block, every step of it ok (else the test fails, the report
    in the message), and brought down after it whatever happened, a failed ``up`` too."""
    try:
        report = asyncio.run(deploy.up(loaded))
        assert all(step.ok for step in report.steps), encode(report)
        yield loaded
    finally:
        asyncio.run(deploy.down(loaded))


@contextlib.asynccontextmanager
async def knob_live(loaded: LoadedSpec, service: str, name: str, value: str) -> AsyncIterator[None]:
    """A test's block on a deployment shared by its module: ``value`` is live as it starts (else
    the test fails: an earlier test left the stack changed), and a block that leaves another value
    live has ``value`` written back and ``service`` co-restarted after it."""
    assert (await diff_knob(loaded, service, name)).live == value
    try:
        yield
    finally:
        if (await diff_knob(loaded, service, name)).live != value:
            await set_knob(loaded, service, name, value)
            restarted = await deploy.restart(loaded, [service], verify_after=False)
            assert restarted.ok, encode(restarted)
