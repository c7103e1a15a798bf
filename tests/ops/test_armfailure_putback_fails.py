"""An arm's failure whose put-back then fails with nothing down (issue 38, the twenty-first
pass): the deployment is left on the arm's value, and the failure says so, as a stop signal's
does (``the deployment is NOT as this command found it``, the ``servelab knob set`` that puts
it back), naming the failure that started it too; never the failure alone.

Real processes on a real simulated stack, a real ledger on a real tmpfs: the arm's value made
live (written, co-restarted), then the tmpfs filled and the arm failed, so the put-back's record
of the knob written back is refused (nothing written) while every service runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.core.deploy.putback import KnobBack
from servelab.errors import DeployError
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec
from servelab.ops.armfailure import as_found_on_failure
from servelab.ops.context import operation
from servelab.ops.deploy.deploy import restart
from servelab.ops.deploy.refused import PutBackAfterFailure
from servelab.ops.knob import get_knob, live_knob, set_knob
from tests.support.putbacks import FOUND, pd_stack
from tests.support.tmpfs import fill, tmpfs

ARM = "256"
FAILURE = "the arm's measurement failed"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "putbackfails")


async def test_a_put_back_that_fails_with_nothing_down_says_what_is_not_back(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    found = [KnobBack("decode", DEFAULT_KNOB, FOUND)]
    try:
        with tmpfs(tmp_path / "tiny", "1m") as mount, Ledger.open(mount / "l.db") as ledger:
            async with operation(stack, ledger=ledger) as op:
                with pytest.raises(PutBackAfterFailure) as raised:
                    async with as_found_on_failure(op, found):
                        await set_knob(op, "decode", DEFAULT_KNOB, ARM, reason="the arm")
                        assert (await restart(op, ["decode"], verify_after=False)).ok
                        assert await live_knob(op, "decode", DEFAULT_KNOB) == ARM
                        fill(mount)
                        raise DeployError(FAILURE)
        put = raised.value.put_back
        assert not put.ok and not put.down and put.error, put
        assert put.not_written == tuple(found) and put.written == ()
        message = str(raised.value)
        assert message.startswith(FAILURE), message
        assert "the deployment is NOT as this command found it" in message, message
        fix = shlex.join(put.fixes[0])
        assert put.fixes[0][:3] == ("servelab", "knob", "set"), put.fixes
        assert fix.endswith(f"decode {DEFAULT_KNOB}={FOUND}") and fix in message, message
        assert isinstance(raised.value.__cause__, DeployError)  # the failure, still chained
        # what it says is so: the file and the process still hold the arm's value
        assert await get_knob(stack, "decode", DEFAULT_KNOB) == ARM
        assert await live_knob(stack, "decode", DEFAULT_KNOB) == ARM
    finally:  # the stack as found, for whoever comes next
        await set_knob(stack, "decode", DEFAULT_KNOB, FOUND, reason="test cleanup")
        await restart(stack, ["decode"], verify_after=False)
