"""Reference answers in a real SQLite ledger: stored with their state, the latest of a key found
again (reused while the state is the same), another state's never."""

from __future__ import annotations

from pathlib import Path

from servelab.core.answers.answer import Answer
from servelab.core.answers.contract import AnswerReferences, AnswersConfig, State, state_key
from servelab.io.ledger.answers import AnswerStore
from servelab.io.ledger.ledger import Ledger


def test_references_are_kept_with_their_state_and_found_by_it(tmp_path: Path) -> None:
    config = AnswersConfig()
    state = State("spec-hash", (("decode", "SGLANG_NSA_INDEX_KEYS_BF16", "0"),))
    key = state_key(state, config, "m")
    answers = (Answer(0, "a b c", None, "length", 24, ("a", " b")),
               Answer(1, '{"city":"x"}', "get_weather", "tool_calls", 6))  # fmt: skip
    with Ledger.open(tmp_path / "l.db") as ledger:
        store = AnswerStore(ledger)
        assert store.find(key) is None
        first = store.add(AnswerReferences(key, state, "m", 1, answers))
        again = store.add(AnswerReferences(key, state, "m", 1, answers[:1]))
        assert first.id is not None and again.id == first.id + 1
    with Ledger.open(tmp_path / "l.db") as ledger:
        store = AnswerStore(ledger)
        found = store.find(key)
        assert found is not None and found.id == again.id and found.answers == answers[:1]
        assert store.get(first.id) == first and found.state == state
        other = State("spec-hash", (("decode", "SGLANG_NSA_INDEX_KEYS_BF16", "1"),))
        assert store.find(state_key(other, config, "m")) is None
