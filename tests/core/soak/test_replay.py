"""The replay matrix's rule: the layer is the first hop, from the engines outwards, at which the
same payload goes from working to failing; a failing pair names its worker."""

from __future__ import annotations

import json
from dataclasses import replace

import servelab.core.soak.replay as replay_mod
from servelab.core.soak.body import ChatBody
from servelab.core.soak.replay import (
    Cell,
    Dependence,
    Hop,
    Payload,
    Reason,
    bisect_next,
    dependence,
    held,
    locate,
    varied,
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
    # The probes that vary one thing, through the same pair: the small prompt with the same
    # answer length gets through, the same prompt with a short answer does not.
    probes = [
        _pair("prefill", "decode1", True, payload=Payload.SMALL_PROMPT),
        _pair("prefill", "decode1", False, payload=Payload.SHORT_ANSWER),
    ]
    assert dependence([*cells, *probes], found) == Dependence.SIZE
    assert replace(found, dependence=Dependence.SIZE).size_dependent
    prefill = locate([_pair("p0", "d", False, "prefill"), _pair("p1", "d", True)])
    assert (prefill.layer, prefill.worker) == ("prefill", "p0")


def test_bisection_halves_until_close_and_shrink_keeps_the_conversation_valid() -> None:
    assert bisect_next(100, 10_100, 0) == 5100
    assert bisect_next(100, 300, 0) is None
    assert bisect_next(100, 10_100, 4) is None
    doc = {
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
    body = ChatBody.of(**doc)
    shrunk = body.shrunk(2500)
    small = json.loads(shrunk.encoded())
    assert len(json.dumps(small).encode()) <= 2500 and shrunk.size <= 2500
    assert small["messages"][0]["role"] == "system" and small["tools"] == doc["tools"]
    assert small["messages"][1]["role"] == "user"  # no tool result left without its call
    assert len(json.loads(body.encoded())["messages"]) == 5  # the original is untouched


def _timed(hop: Hop, first: float, gap: float = 0.05, **kw: str) -> Cell:
    return replace(_cell(hop, True, **kw), first_event_s=first, max_gap_s=gap)


def test_every_failed_cell_counts_plain_ones_included() -> None:
    # The streamed failing payload passes everywhere; the proxy fails the plain one (its read
    # timeout cuts an answer that is not streamed) while the router answers it.
    plain = [
        replace(_cell(Hop.ROUTER, True), stream=False),
        replace(_cell(Hop.FRESH, False), stream=False, status=504),
    ]
    streamed = [_pair("p", "d", True), _cell(Hop.ROUTER, True), _cell(Hop.FRESH, True)]
    found = locate([*streamed, *plain])
    assert (found.layer, found.hop, found.reason) == ("client_proxy", Hop.FRESH, Reason.PROXY)
    assert found.failing == ("matrix.entry_fresh.entry.failing.plain",)
    assert found.working == ("matrix.router.router.failing.plain",)
    # A failed cell inside the located hop is not explained by it: it is listed as conflicting.
    inside = replace(_cell(Hop.ROUTER, False, Payload.MINIMAL), stream=False)
    with_inner = locate([*streamed, *plain, _pair("p", "d", True, payload=Payload.MINIMAL), inside])
    assert with_inner.conflicting == ("matrix.router.router.minimal.plain",)
    # A failed cell outside the located hop is explained by it (a failure inside shows outside).
    outer = locate([*streamed[:2], _cell(Hop.FRESH, False), _cell(Hop.REUSED, False)])
    assert outer.hop == Hop.FRESH and outer.conflicting == ()


def test_a_failure_only_under_load_names_the_hop_and_the_load() -> None:
    alone = [_pair("p", "d", True), _cell(Hop.ROUTER, True), _cell(Hop.FRESH, True)]
    assert locate(alone).reason == Reason.NOT_REPRODUCED
    loaded = [
        replace(_pair("p", "d", True, payload=Payload.LOADED), copies=6),
        replace(_cell(Hop.ROUTER, True, Payload.LOADED), copies=6),
        replace(_cell(Hop.FRESH, False, Payload.LOADED), copies=6, failed_copies=2),
    ]
    found = locate([*alone, *loaded])
    assert (found.layer, found.hop, found.dependence, found.load) == (
        "client_proxy", Hop.FRESH, Dependence.LOAD, 6,
    )  # fmt: skip
    assert found.failing == ("matrix.entry_fresh.entry.loaded.stream",)
    assert "matrix.router.router.loaded.stream" in found.working


def test_a_held_stream_is_the_hop_that_holds_it() -> None:
    # Every hop answers; through the entry the first token comes at 1.0 s, at the router 0.14 s.
    cells = [_timed(Hop.ROUTER, 0.14), _timed(Hop.FRESH, 1.0)]
    found = locate([_pair("p", "d", True), *cells])
    assert (found.layer, found.hop, found.reason) == ("client_proxy", Hop.FRESH, Reason.HELD)
    assert held(cells[1], cells[0]) and not held(cells[0], cells[1])
    # Jitter is not a hold: 0.14 against 0.30 s, or a gap that grows from 0.05 to 0.2 s.
    assert not held(_timed(Hop.FRESH, 0.30), cells[0])
    assert not held(_timed(Hop.FRESH, 0.14, gap=0.2), cells[0])
    assert held(_timed(Hop.FRESH, 0.14, gap=0.9), cells[0])  # tokens held in bursts
    assert locate([_pair("p", "d", True), cells[0], _timed(Hop.FRESH, 0.15)]).layer is None


def test_what_a_failure_depends_on_is_decided_by_probes_that_vary_one_thing() -> None:
    base = [_cell(Hop.ROUTER, True), _cell(Hop.FRESH, False)]
    loc = locate(base)

    def probes(small_ok: bool, short_ok: bool) -> Dependence | None:
        cells = [
            _cell(Hop.FRESH, small_ok, Payload.SMALL_PROMPT),
            _cell(Hop.FRESH, short_ok, Payload.SHORT_ANSWER),
        ]
        return dependence([*base, *cells], loc)

    assert probes(True, False) == Dependence.SIZE  # a body limit, a first-token timeout
    assert probes(False, True) == Dependence.LENGTH  # a cut long stream, buffering
    assert probes(True, True) == Dependence.SIZE_AND_LENGTH
    assert probes(False, False) == Dependence.NEITHER
    # The failing payload, unchanged, after a pause gets through: whatever the other probes say,
    # it failed for what was sent before it (a rate limit): load-dependent.
    for small, short in ((True, True), (False, False), (True, False)):
        cells = [
            _cell(Hop.FRESH, small, Payload.SMALL_PROMPT),
            _cell(Hop.FRESH, short, Payload.SHORT_ANSWER),
            _cell(Hop.FRESH, True, Payload.SPACED),
        ]
        assert dependence([*base, *cells], loc) == Dependence.LOAD
    probes = (Payload.SMALL_PROMPT, Payload.SHORT_ANSWER, Payload.SPACED)
    failed_again = [*base, *(_cell(Hop.FRESH, p == Payload.SMALL_PROMPT, p) for p in probes)]
    assert dependence(failed_again, loc) == Dependence.SIZE
    assert dependence(base, loc) is None  # the probes did not run
    # A probe that arrives held (against the same probe at the router) did not get through.
    held_loc = locate([_timed(Hop.ROUTER, 0.14), _timed(Hop.FRESH, 1.0)])
    short = [_timed(Hop.ROUTER, 0.1, payload=Payload.SHORT_ANSWER),
             _timed(Hop.FRESH, 0.2, payload=Payload.SHORT_ANSWER)]  # fmt: skip
    small = [_timed(Hop.ROUTER, 0.1, payload=Payload.SMALL_PROMPT),
             _timed(Hop.FRESH, 1.0, payload=Payload.SMALL_PROMPT)]  # fmt: skip
    assert dependence([*short, *small], held_loc) == Dependence.LENGTH


def test_the_probes_vary_one_thing_of_the_failing_payload() -> None:
    failing = ChatBody.of(
        model="m", messages=[{"role": "user", "content": "x" * 900}],
        tools=[{"type": "function"}], tool_choice="auto", max_tokens=24,
    )  # fmt: skip
    minimal = ChatBody.of(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    small = json.loads(varied(failing, minimal, Payload.SMALL_PROMPT).encoded())
    assert small["messages"] == json.loads(minimal.encoded())["messages"]
    assert small["max_tokens"] == 24
    assert "tools" not in small and "tool_choice" not in small
    short = json.loads(varied(failing, minimal, Payload.SHORT_ANSWER).encoded())
    assert short["messages"] == json.loads(failing.encoded())["messages"]
    assert short["max_tokens"] == 1
    assert varied(failing, minimal, Payload.FAILING) is failing
