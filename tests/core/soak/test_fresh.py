"""Fresh context per round (pure): a stated, seeded mix of short and long new turns, and the
uncached prefill the rounds reached read from usage's cached tokens."""

from __future__ import annotations

import pytest

from servelab.core.load.records import RequestRecord
from servelab.core.soak.agentic import Answer, Conversation
from servelab.core.soak.fresh import (
    MAX_FRESH_WORDS,
    FreshContext,
    UncachedPrefill,
    parse_fresh_context,
    uncached_prefill,
)


def test_the_mix_is_seeded_and_keeps_its_share() -> None:
    mix = FreshContext(short_words=20, long_words=800, long_share=0.25)
    draws = [mix.words(7, s, r) for s in range(40) for r in range(10)]
    assert draws == [mix.words(7, s, r) for s in range(40) for r in range(10)]  # replayable
    assert set(draws) == {20, 800}
    assert 0.18 < draws.count(800) / len(draws) < 0.32
    assert draws != [mix.words(8, s, r) for s in range(40) for r in range(10)]  # another seed
    assert {FreshContext(20, 800, 0.0).words(0, 0, r) for r in range(50)} == {20}
    assert {FreshContext(20, 800, 1.0).words(0, 0, r) for r in range(50)} == {800}


def test_the_option_reads_short_and_long_and_refuses_anything_else() -> None:
    assert parse_fresh_context("short:200,long:4000") == (200, 4000)
    assert parse_fresh_context(" long:10 , short:5 ") == (5, 10)
    for bad in ("", "short:200", "short:a,long:4", "short:1,long:2,long:3", "mid:1,long:2"):
        with pytest.raises(ValueError):
            parse_fresh_context(bad)
    for bad in ("short:\u0663,long:4", "short:\u00b2,long:4"):  # other scripts' digits, ``²``
        with pytest.raises(ValueError, match="whole number of words"):
            parse_fresh_context(bad)
    for args in ((0, 10, 0.5), (20, 10, 0.5), (1, 10, 1.5)):
        with pytest.raises(ValueError):
            FreshContext(*args)


def test_a_long_round_adds_long_new_context_to_the_conversation() -> None:
    conv = Conversation(0, seed=3, fresh=FreshContext(10, 500, 1.0))
    assert len(conv.messages[-1].content.split()) > 500  # the first turn already long
    conv.add_answer(Answer("ok"))
    assert len(conv.messages[-1].content.split()) > 500
    plain = Conversation(0, seed=3)
    assert len(plain.messages[-1].content.split()) < 60  # no mix: turn_words each round


def _answered(prompt: int, cached: int | None, ok: bool = True) -> RequestRecord:
    r = RequestRecord(index=0, scheduled_ns=0, input_tokens=prompt, cached_tokens=cached,
                      end_ns=1)  # fmt: skip
    if not ok:
        r.fail("idle timeout")
    return r


def test_the_uncached_prefill_is_the_prompt_less_what_the_cache_served() -> None:
    records = [_answered(1000 + 100 * i, 900) for i in range(10)]  # 100 .. 1000 uncached
    records += [_answered(5000, None), _answered(9000, 0, ok=False)]  # unknown, failed
    assert uncached_prefill(records) == UncachedPrefill(1000, 900, 10)
    assert uncached_prefill([_answered(10, None)]) == UncachedPrefill()


def test_a_fresh_context_no_context_holds_is_refused_as_it_is_read() -> None:
    """A round of 10^20 words was taken, and the soak crashed mid-run (OverflowError) after it
    had loaded the deployment and written a record."""
    for text in ("short:48,long:99999999999999999999", f"short:48,long:{MAX_FRESH_WORDS + 1}"):
        with pytest.raises(ValueError, match="at most 1,048,576 words a round"):
            parse_fresh_context(text)
    assert parse_fresh_context(f"short:48,long:{MAX_FRESH_WORDS}") == (48, MAX_FRESH_WORDS)
    with pytest.raises(ValueError, match="at most"):
        FreshContext(48, MAX_FRESH_WORDS + 1, 0.5)
