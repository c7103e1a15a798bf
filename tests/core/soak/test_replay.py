"""The replay matrix's rule: the layer is the first hop, from the engines outwards, at which the
same payload goes from working to failing; a failing pair names its worker."""

from __future__ import annotations

import json

import servelab.core.soak.replay as replay_mod
from servelab.core.soak.replay import (
    Cell,
    Hop,
    Payload,
    Reason,
    bisect_next,
    locate,
    shrink,
)
from servelab.core.soak.signatures import Outcome


def _cell(hop: Hop, ok: bool, payload: Payload = Payload.FAILING, **kw: str) -> Cell:
    target = kw.pop("target", "entry" if hop in (Hop.FRESH, Hop.REUSED) else "router")
    return Cell(hop, target, payload, True, 100, Outcome.OK if ok else Outcome.STALLED, **kw)  # type: ignore[arg-type]


def _pair(
    prefill: str, decode: str, ok: bool, side: str = "decode", payload: Payload = Payload.FAILING
) -> Cell:
    return Cell(
        Hop.PAIR, f"{prefill}+{decode}", payload, True, 100, Outcome.OK if ok else Outcome.STALLED,
        side="" if ok else side, prefill=prefill, decode=decode,
    )  # fmt: skip


def test_public_api_is_explicit() -> None:
    for name in replay_mod.__all__:
        assert hasattr(replay_mod, name), name


def test_the_first_hop_that_fails_after_working_inside_it_is_the_layer() -> None:
    pairs = [_pair("p", "d", True)]
    reuse = locate(
        [*pairs, _cell(Hop.ROUTER, True), _cell(Hop.FRESH, True), _cell(Hop.REUSED, False)]
    )
    assert (reuse.layer, reuse.reason) == ("client_proxy", Reason.CONNECTION_REUSE)
    assert "matrix.entry_fresh.entry.failing.stream" in reuse.working
    proxy = locate([*pairs, _cell(Hop.ROUTER, True), _cell(Hop.FRESH, False)])
    assert (proxy.layer, proxy.reason, proxy.hop) == ("client_proxy", Reason.PROXY, Hop.FRESH)
    router = locate([*pairs, _cell(Hop.ROUTER, False), _cell(Hop.FRESH, False)])
    assert (router.layer, router.reason) == ("router", Reason.ROUTER)
    assert router.working == ("matrix.pair.p+d.failing.stream",)
    clean = locate([*pairs, _cell(Hop.ROUTER, True), _cell(Hop.FRESH, True)])
    assert (clean.layer, clean.reason) == (None, Reason.NOT_REPRODUCED)
    blind = locate([_cell(Hop.ROUTER, False)])  # no pair could be replayed: no conviction
    assert (blind.layer, blind.reason) == (None, Reason.NO_PAIR_REPLAY)


def test_a_failing_pair_names_its_worker_among_two_decodes() -> None:
    cells = [
        _pair("prefill", "decode0", True),
        _pair("prefill", "decode1", False),
        _pair("prefill", "decode1", True, payload=Payload.MINIMAL),
        _cell(Hop.ROUTER, False),
    ]
    found = locate(cells)
    assert (found.layer, found.worker, found.reason) == (
        "decode_transfer",
        "decode1",
        Reason.ENGINE_PAIR,
    )
    assert found.size_dependent  # the minimal payload gets through the same pair
    prefill = locate([_pair("p0", "d", False, "prefill"), _pair("p1", "d", True)])
    assert (prefill.layer, prefill.worker) == ("prefill", "p0")


def test_bisection_halves_until_close_and_shrink_keeps_the_conversation_valid() -> None:
    assert bisect_next(100, 10_100, 0) == 5100
    assert bisect_next(100, 300, 0) is None
    assert bisect_next(100, 10_100, 4) is None
    body = {
        "model": "m",
        "tools": [{"type": "function", "function": {"name": "read_file"}}],
        "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "a" * 4000},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
            {"role": "tool", "tool_call_id": "1", "content": "b" * 4000},
            {"role": "user", "content": "c" * 4000},
        ],
    }
    small = shrink(body, 2500)
    assert len(json.dumps(small).encode()) <= 2500
    assert small["messages"][0]["role"] == "system" and small["tools"] == body["tools"]
    assert small["messages"][1]["role"] == "user"  # no tool result left without its call
    assert len(body["messages"]) == 5  # the original is untouched
