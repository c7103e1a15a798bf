"""Where a changed answer went wrong, from its top-1 tokens against its reference."""

from __future__ import annotations

from servelab.core.answers.answer import Answer
from servelab.core.answers.transfer import AnswerSite, Divergence, diverge_at, site_of

REF = Answer(0, "The pass key is 123456.", top1=("The", " pass", " key", " is", " 123456", "."))


def _with(*tokens: str) -> Answer:
    return Answer(0, "".join(tokens), top1=tokens)


def test_the_first_differing_position_and_the_first_token() -> None:
    wrong_kv = diverge_at(_with("The", " stone", " river", " is", " 99", "."), REF)
    assert (wrong_kv.at, wrong_kv.first_token_agrees) == (1, True)
    recall = diverge_at(_with("The", " pass", " key", " is", " 654321", "."), REF)
    assert (recall.at, recall.first_token_agrees) == (4, True)
    assert diverge_at(_with("The", " pass"), REF).at == 2  # shorter: differs where it ends
    assert diverge_at(_with("A", " pass"), REF).first_token_agrees is False
    assert diverge_at(Answer(0, "x"), REF) == Divergence(0, None, None)  # no log-probabilities


def test_the_hand_off_needs_every_changed_probe_at_the_decodes_first_token() -> None:
    at_1 = [Divergence(0, 1, True), Divergence(1, 1, True)]
    assert site_of(at_1) is AnswerSite.KV_TRANSFER
    assert site_of(at_1[:1]) is AnswerSite.LATER  # one probe alone is not a signature
    assert site_of([*at_1, Divergence(2, 3, True)]) is AnswerSite.LATER
    assert site_of([Divergence(0, 0, False), Divergence(1, 0, False)]) is AnswerSite.LATER
    assert site_of([*at_1, Divergence(2, None, None)]) is AnswerSite.UNKNOWN
    assert site_of([]) is AnswerSite.LATER
