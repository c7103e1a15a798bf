"""``servelab init``'s reads are bounded in total too (the sixth hostile pass): a deployment
whose answers together pass :data:`~servelab.core.init.contract.ANSWERS_BYTES` is read no
further, in an error, against real hostile processes (``tests/support/hostile_router.py``)."""

from __future__ import annotations

import asyncio
import re

import pytest

import servelab.ops.init as init_module
from servelab.errors import WorkerListError
from servelab.ops.init import InitOptions, discover
from tests.cli.test_init_hostile_cli import _hostile


@pytest.mark.timeout(120)
def test_the_answers_together_are_read_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(init_module, "ANSWERS_BYTES", 2 << 20)  # two answers of 1 MiB
    with (
        _hostile("bloated") as one,
        _hostile("bloated") as two,
        _hostile("plain") as prefill,
        _hostile("fanout", one, two, prefill=prefill) as url,
    ):
        said = f"{url}: the deployment's answers are over 2 MiB together: init reads"
        with pytest.raises(WorkerListError, match=re.escape(said)):  # bad input: exit 2
            asyncio.run(discover(InitOptions(url)))
