"""An A/B arm of the router's policy, and what sglang-router's ``cache_aware`` does in PD mode,
for real: the 2P2D example (two simulated prefills, two simulated decodes, the real router) on
free ports.

The arm is proven live although the router's argv is unreadable (sglang-router 0.3.2 writes
``sglang::router`` over it): by the policy its selection counter reports. Then a two-turn
conversation, built as a trace replay builds it: the second prompt starts with every character of
the first (what the router matches on: the text of a chat request's first message), yet
sglang-router 0.3.2 never seeds the trees of its PD prefill and decode policies (its registry
seeds the per-model policy only), so each selection finds no tree and picks a worker at random
(``src/policies/cache_aware.rs`` line 464 of its build: "No tree found for model ..., using
random worker selection"). That is why the cache-aware A/B of docs/bench.md shows no gain. If
this test fails after an upgrade, the router seeds them now: run that A/B again.

smg 1.13 (its twin, ``examples/local-2p2d-smg.toml``) does seed them: each conversation's second
turn goes to the prefill that served its first (``routers.toml``'s ``pd_cache_aware``), which is
the hit-rate gain of docs/bench.md's A/B on smg.
"""

from __future__ import annotations

import asyncio
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from servelab.core.load.trace import PromptBuilder, TraceTurn
from servelab.io.specfile import load_spec
from servelab.ops.arm import Setting, make_live
from servelab.ops.context import Operation
from servelab.ops.deploy import deploy
from tests.support.http import metric, post
from tests.support.xpyd import write_2p2d_spec

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RANDOM = "No tree found for model 'servelab-sim', using random worker selection"


def _served_by(router: str, prefills: list[str], prompt: str) -> list[float]:
    """Send ``prompt`` through the router; how many requests each prefill served meanwhile."""
    before = [metric(p, "sglang:num_requests_total") for p in prefills]
    body = {"model": "servelab-sim", "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 2}  # fmt: skip
    status, answer = post(f"{router}/v1/chat/completions", body)
    assert status == 200, answer
    return [
        metric(p, "sglang:num_requests_total") - b for p, b in zip(prefills, before, strict=True)
    ]


@pytest.mark.timeout(200)
def test_a_policy_arm_is_live_and_cache_aware_in_pd_mode_picks_at_random(tmp_path: Path) -> None:
    spec, ports = write_2p2d_spec(tmp_path)
    (tmp_path / "env" / "router-2p2d.env").write_text(
        'ROUTER_ARGS="--policy round_robin --log-level debug"\n'
    )
    build = PromptBuilder(512, seed=1)
    first, second = TraceTurn(700, 1, (0, 1)), TraceTurn(1300, 1, (0, 2, 3))
    prompts = [build.prompt(first, 0), build.prompt(second, 1, before=first)]
    assert prompts[1].startswith(prompts[0] + " ")  # the router's text: the history, whole
    prefills = [f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[2]}"]
    router = f"http://127.0.0.1:{ports[6]}"
    log_path = tmp_path / "state" / "logs" / "router.log"

    async def scenario() -> tuple[tuple[str | None, ...], int, list[list[float]]]:
        async with Operation(load_spec(spec)) as op:
            assert (await deploy.up(op)).ok
            try:
                arm = await make_live(op, [Setting("router", "--policy", "cache_aware")], "test")
                mark = len(log_path.read_text())
                served = [await asyncio.to_thread(_served_by, router, prefills, p) for p in prompts]
            finally:
                await deploy.down(op)
        return arm.live, mark, served

    live, mark, served = asyncio.run(scenario())
    assert live == ("cache_aware",)  # read back from the router's selection counter
    assert sorted(map(sorted, served)) == [[0, 1], [0, 1]]  # each turn: one prefill
    log = _ANSI.sub("", log_path.read_text()[mark:])
    chosen = [line for line in log.splitlines() if "policies::cache_aware" in line]
    # every selection (a prefill and a decode per request) fell to random, none used a tree
    assert len([line for line in chosen if _RANDOM in line]) == 2 * len(prompts), (
        f"sglang-router {version('sglang-router')} chose by its tree: rerun the cache-aware A/B",
        chosen,
    )


@pytest.mark.timeout(200)
def test_smg_cache_aware_keeps_each_conversation_on_one_prefill(tmp_path: Path) -> None:
    """smg 1.13 builds its PD trees: a conversation's second turn (its prompt the first one's
    whole text and more) goes to the prefill that served the first, for every conversation.
    Four conversations: by chance (0.3.2's random pick) all four would stay with odds 1 in 16."""
    spec, ports = write_2p2d_spec(tmp_path, router="smg")
    (tmp_path / "env" / "router-2p2d.env").write_text('ROUTER_ARGS="--policy cache_aware"\n')
    prefills = [f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[2]}"]
    router = f"http://127.0.0.1:{ports[6]}"
    first, second = TraceTurn(700, 1, (0, 1)), TraceTurn(1300, 1, (0, 2, 3))
    conversations = []
    for seed in range(4):
        build = PromptBuilder(512, seed=10 + seed)
        conversations.append([build.prompt(first, 0), build.prompt(second, 1, before=first)])

    async def scenario() -> list[list[list[float]]]:
        async with Operation(load_spec(spec)) as op:
            assert (await deploy.up(op)).ok
            try:
                return [
                    [await asyncio.to_thread(_served_by, router, prefills, p) for p in turns]
                    for turns in conversations
                ]
            finally:
                await deploy.down(op)

    served = asyncio.run(scenario())
    for turns in served:
        assert sorted(map(sorted, turns)) == [[0, 1], [0, 1]]  # each turn: one prefill
        assert turns[0] == turns[1], served  # the second on the first's prefill
