"""Every failure class of a real proxy is localized to the proxy and nothing else is convicted;
the clean proxies pass. nginx and HAProxy (Debian's packages) run as plain processes with their
own config, pid, log and temp paths under the test's directory, in front of the real
sglang-router and the simulated workers (one stack per time scale, shared by the module).

Each class is soaked once here (``benchmarks/proxy_classes.py --runs 3`` soaks each three times:
the table in docs/soak.md); the class's details are checked beside the verdict: which hop answered
(``Server``, no request id back), the load a failure took, the resends a client masked, the
buffering seen by first-token times across hops. The clients: ``naive`` fails where servelab's
own client resends, and ``openai`` (the official SDK) gets through the clean proxy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.soak.result import SoakClient, SoakResult, Targets
from servelab.core.soak.signatures import Signature
from servelab.report.soak.soak import render_soak
from servelab.sim.settings import ENV_WARMUP_S
from tests.support.proxies import (
    CLASSES,
    SLOW_PREFILL_ARGS,
    STACK_SCALES,
    ProxyClass,
    expected,
    soak_through,
    verdict,
)
from tests.support.soak import soak_targets
from tests.support.stack import sim_stack

BY_NAME = {c.name: c for c in CLASSES}


def _stack(scale: float, prefill_args: tuple[str, ...] = ()) -> Iterator[Targets]:
    with sim_stack(time_scale=scale, env={ENV_WARMUP_S: "0"}, prefill_args=prefill_args) as st:
        yield soak_targets(st)


@pytest.fixture(scope="module")
def fast() -> Iterator[Targets]:
    yield from _stack(STACK_SCALES["fast"])


#: The slow stack's soaks here send no answer probes (``benchmarks/proxy_classes.py`` keeps them):
#: at ten times the modelled time each probe waits seconds on an answer, or on the proxy's cut,
#: that none of these tests checks; the sessions and the replay matrix decide the verdict.
@pytest.fixture(scope="module")
def slow() -> Iterator[Targets]:
    # no prefix cache: every round's first token waits for its whole prompt's prefill, which is
    # what a read timeout cuts (with the cache, a warm round's first token comes too soon)
    yield from _stack(STACK_SCALES["slow"], SLOW_PREFILL_ARGS)


def _soak(cls: ProxyClass, targets: Targets, tmp: Path, **over: object) -> SoakResult:
    result, took = soak_through(cls, targets, tmp / cls.name, **over)
    seen = verdict(result)
    print(f"PROXYCLASS {cls.name}: {seen} in {took:.1f} s")
    assert expected(cls, seen) == [], render_soak(result)
    return result


def _located(result: SoakResult) -> tuple[str | None, int | None]:
    loc = next(loc.matrix.located for loc in result.localizations if loc.matrix.layer)
    return (None if loc.dependence is None else loc.dependence.value), loc.load


def test_a_body_limit_is_the_proxy_and_depends_on_the_prompts_size(
    fast: Targets, tmp_path: Path
) -> None:
    result = _soak(BY_NAME["body_limit"], fast, tmp_path)
    assert {f.status for f in result.failures} == {413}
    front = [o for o in result.observations if o.kind == "answers.front"]
    assert front and "nginx" in front[0].servers[0]  # type: ignore[union-attr]
    assert result.dropped == ()  # nothing else fired to be explained away


def test_a_connection_limit_fails_only_under_load_and_names_the_load(
    fast: Targets, tmp_path: Path
) -> None:
    result = _soak(BY_NAME["conn_limit"], fast, tmp_path)
    depends, load = _located(result)
    assert depends == "load" and load is not None and load > 1


def test_a_rate_limit_is_the_proxy_and_load_dependent(fast: Targets, tmp_path: Path) -> None:
    result = _soak(BY_NAME["rate_limit"], fast, tmp_path)
    assert {f.status for f in result.failures} == {429}


def test_closing_idle_connections_is_masked_by_resends_and_found_from_them(
    fast: Targets, tmp_path: Path
) -> None:
    cls = BY_NAME["idle_close"]
    result = _soak(cls, fast, tmp_path)
    assert not result.errors and not result.stalls  # servelab's client masked every close
    assert len(result.resends) >= 2 and all(r.idle_s >= 1.5 for r in result.resends)
    assert result.localizations[0].signature == Signature.RESENT
    # A plain client meets the close itself: its failure on the reused connection, same layer.
    naive = _soak(cls, fast, tmp_path / "naive", client=SoakClient.NAIVE)
    assert naive.errors and naive.resends == ()
    assert naive.failures[0].connection_requests >= 1 and naive.failures[0].idle_s >= 1.5


def test_each_clean_proxy_passes_with_no_finding(fast: Targets, tmp_path: Path) -> None:
    for name in ("clean_nginx", "clean_haproxy"):
        result = _soak(BY_NAME[name], fast, tmp_path)
        assert result.ok and not result.failures and not result.resends


def test_the_openai_sdk_soaks_through_the_clean_proxy(fast: Targets, tmp_path: Path) -> None:
    result = _soak(BY_NAME["clean_nginx"], fast, tmp_path, client=SoakClient.OPENAI)
    assert result.sessions.completed == result.sessions.count
    assert result.config.client == SoakClient.OPENAI


def test_a_read_timeout_cutting_long_first_token_waits_depends_on_the_prompt(
    slow: Targets, tmp_path: Path
) -> None:
    result = _soak(BY_NAME["read_timeout"], slow, tmp_path, answer_probes=0)
    assert {f.status for f in result.failures} == {504}


def test_buffering_is_seen_by_first_token_times_not_by_the_idle_timeout(
    slow: Targets, tmp_path: Path
) -> None:
    result = _soak(BY_NAME["buffering"], slow, tmp_path, answer_probes=0)
    assert not result.stalls and not result.errors  # every answer arrived within the timeout
    cells = {c.id: c for c in result.localizations[0].matrix.cells}
    entry = cells["matrix.entry_fresh.entry.failing.stream"]
    router = cells["matrix.router.router.failing.stream"]
    assert entry.first_event_s is not None and router.first_event_s is not None
    assert entry.first_event_s > router.first_event_s + 0.3


def test_the_openai_sdks_retries_are_kept_as_resends(fast: Targets, tmp_path: Path) -> None:
    # The SDK retries a 429 (twice, its default) before it gives up: each retry is a failure it
    # masked, kept with the status it retried after; the rate limit is still the proxy's.
    result = _soak(BY_NAME["rate_limit"], fast, tmp_path, client=SoakClient.OPENAI)
    assert result.resends and {r.status for r in result.resends} == {429}


def test_a_total_response_timeout_cuts_long_answers_and_depends_on_their_length(
    slow: Targets, tmp_path: Path
) -> None:
    # Varnish closes the connection once a response has taken send_timeout in all, however
    # steadily its tokens come: the stream is cut (no idle stall), the router's is whole.
    result = _soak(BY_NAME["total_timeout"], slow, tmp_path, answer_probes=0)
    assert result.errors and not result.stalls
    cells = {c.id: c for c in result.localizations[0].matrix.cells}
    assert cells["matrix.router.router.failing.stream"].ok
    assert not cells["matrix.entry_fresh.entry.failing.stream"].ok
