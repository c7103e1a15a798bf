"""Issue 38, 22nd pass H1: ``bench --find-capacity`` right after a deployment starts. Its first
probe paid the engines' one-time warm-up (the simulator's ``SERVELAB_SIM_WARMUP_S``, as a real
engine's first requests are slow), missed, and the search concluded "capacity C7: not at C8"
from it. Now the first probe is warmed up unless ``--warmup`` is typed, and a load that missed
before any load held is probed again before anything is concluded from it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support import run_cli
from tests.support.stack import SimStack, sim_stack

#: 40 modelled seconds of one-time warm-up at time scale 0.05: 2 s on the first request, over
#: the SLO's 1 s; a warm request at C64 takes tens of milliseconds.
COLD = {"SERVELAB_SIM_WARMUP_S": "40"}


@pytest.fixture
def cold() -> Iterator[SimStack]:
    with sim_stack(time_scale=0.05, env=COLD) as stack:
        yield stack


def _search(stack: SimStack, *extra: str) -> tuple[dict[str, object], str]:
    done = run_cli("bench", "--url", stack.router_url, "--find-capacity", "--slo",
                   "ttft_p99=1s", "--concurrency", "8,64", "--requests", "64", "--input-len",
                   "16", "--output-len", "8", "--json", "--no-ledger", *extra,
                   timeout=300)  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout), done.stderr


def _held_at_c8(doc: dict[str, object]) -> None:
    assert doc["capacity"] is not None and doc["capacity"] >= 8, doc["conclusion"]  # type: ignore[operator]
    assert doc["above"] != 8 and "not at C8" not in str(doc["conclusion"]), doc["conclusion"]


def test_a_cold_stack_is_warmed_up_before_the_first_probe(cold: SimStack) -> None:
    doc, stderr = _search(cold)
    _held_at_c8(doc)
    probes = doc["probes"]
    assert isinstance(probes, list) and probes[0]["load"] == 8 and probes[0]["met"]
    assert "8 request(s) before the first probe" in stderr
    assert doc["config"]["warmup"] == 0  # type: ignore[index]  # the search's own config


def test_a_cold_miss_is_probed_again_when_the_warm_up_is_declined(cold: SimStack) -> None:
    doc, stderr = _search(cold, "--warmup", "0")
    assert "before the first probe" not in stderr
    probes = doc["probes"]
    assert isinstance(probes, list)
    first, again = probes[0], next(p for p in probes[1:] if p["load"] == 8)
    assert not first["met"], first  # the cold one: the warm-up's 2 s over a 1 s p99
    assert again["met"], again
    _held_at_c8(doc)
