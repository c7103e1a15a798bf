"""A deployment up for a test's block and down after it: the `up`/`down` pair every stack fixture
of the CLI tests wrote for itself (real processes through ops/deploy, as ``servelab up`` does)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from servelab.core.ledger.codec import encode
from servelab.io.specfile import LoadedSpec
from servelab.ops.deploy import deploy

__all__ = ["deployed"]


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
