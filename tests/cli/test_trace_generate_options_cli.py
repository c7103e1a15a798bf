"""`trace generate --requests` is a chat trace's count: with ``--kind agentic`` (the default) it
was silently ignored (issue 38, eighteenth pass), the trace's size set by ``--sessions`` and
``--turns`` alone. Now it is refused, exit 2 naming it, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import run_cli


@pytest.mark.parametrize("kind", [(), ("--kind", "agentic")])
def test_requests_with_an_agentic_trace_is_refused_naming_it(
    tmp_path: Path, kind: tuple[str, ...]
) -> None:
    out = tmp_path / "trace.jsonl"
    done = run_cli("trace", "generate", str(out), *kind, "--requests", "5", "--json")
    assert done.returncode == 2, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["exit_code"] == 2 and "--requests" in doc["error"], doc
    assert "--sessions and --turns" in doc["error"], doc
    assert not out.exists()


def test_requests_still_counts_a_chat_trace_and_agentic_without_it_runs(tmp_path: Path) -> None:
    chat = run_cli("trace", "generate", str(tmp_path / "c.jsonl"), "--kind", "chat",
                   "--requests", "5", "--json")  # fmt: skip
    assert chat.returncode == 0, chat.stderr
    assert json.loads(chat.stdout)["lines"] == 5
    agentic = run_cli("trace", "generate", str(tmp_path / "a.jsonl"), "--sessions", "2",
                      "--turns", "3", "3", "--json")  # fmt: skip
    assert agentic.returncode == 0, agentic.stderr
    assert json.loads(agentic.stdout)["lines"] == 6
