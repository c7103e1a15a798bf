"""A size-dependent proxy timeout with the prefix cache on (issue 37): nginx's read timeout
(1050 ms) in front of the real sglang-router and a prefill that keeps its prefix cache.

With the cache on, a warm round prefills only the turn it adds: the read-timeout class's soak
(600-word turns on a growing history) never meets the timeout. Rounds that add long fresh context
(``--fresh-context``, as real agents' tool outputs do) do, and the replay matrix must then say
what the failure depends on by replays that are as uncached as the failing request was: each
cell's last turn is its own (``ops/soak/replay.py``), or the second sending of the failing
payload rides on the first one's prefill, gets through, and reads as a load.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.soak.fresh import FreshContext
from servelab.core.soak.result import Targets
from servelab.report.soak.soak import render_soak
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.proxies import CLASSES, STACK_SCALES, expected, soak_through, verdict
from tests.support.soak import soak_targets
from tests.support.stack import sim_stack

READ_TIMEOUT = next(c for c in CLASSES if c.name == "read_timeout")
#: Short turns, and one in two long: 2,400 fresh words prefill in about 1.4 s at this time
#: scale, past the proxy's 1,050 ms; 600 cached-history words in about 0.5 s.
FRESH = FreshContext(short_words=48, long_words=2400, long_share=0.5)


@pytest.fixture(scope="module")
def cached() -> Iterator[Targets]:
    # the slow stack of the proxy classes, but its prefill keeps the prefix cache (the default),
    # and the answers say how much of each prompt was cached (as SGLang does when asked)
    report = ("--enable-cache-report",)
    with sim_stack(
        time_scale=STACK_SCALES["slow"], env={ENV_WARMUP_S: "0"},
        prefill_args=report, decode_args=report,
    ) as stack:  # fmt: skip
        yield soak_targets(stack)


@pytest.mark.timeout(300)
def test_a_warm_cache_hides_the_timeout_from_rounds_that_add_little(
    cached: Targets, tmp_path: Path
) -> None:
    result, _ = soak_through(READ_TIMEOUT, cached, tmp_path)
    assert result.ok and not result.findings, render_soak(result)
    # every round after the first prefilled only its own turn
    assert result.uncached.max_tokens is not None and result.uncached.max_tokens < 1500


@pytest.mark.timeout(300)
def test_fresh_long_context_meets_the_timeout_and_it_is_the_proxy_by_size(
    cached: Targets, tmp_path: Path
) -> None:
    result, _ = soak_through(
        READ_TIMEOUT, cached, tmp_path, turn_words=48, rounds=4, fresh_context=FRESH
    )
    seen = verdict(result)
    assert expected(READ_TIMEOUT, seen) == [], render_soak(result)
    assert seen.reason == "proxy" and seen.dependence == "size"
    assert {f.status for f in result.failures} == {504}
