"""The simulator's own tests read what only it answers (``/server_info``'s ``servelab`` object:
knobs, faults, counters, recent rooms), so its workers here run with ``SERVELAB_SIM_EXTRAS=1``;
everywhere else they answer exactly as the real engines do (``tests/contracts/``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servelab.sim.settings import ENV_EXTRAS


@pytest.fixture(scope="package", autouse=True)
def sim_extras() -> Iterator[None]:
    """Every worker these tests start (they inherit the environment) answers with the extras."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_EXTRAS, "1")
        yield
