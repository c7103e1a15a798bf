"""``case bisect`` convicts nothing it did not see (issue 38, the twenty-first pass): the good
state (no change applied) is the first probe, against the bad state, on a real simulated stack
behind the real router, through the CLI.

1. One change and a test that never fails (``throughput@C2<1``: no run is that slow): the bad
   state never fails, so the failure did not reproduce; nothing is convicted (it was convicted
   in 0 probes before).
2. Two changes and a test that fails in every state (``throughput@C2>1``): the good state fails
   like the bad one, so it is not these changes; nothing is convicted (one was convicted and the
   other exonerated before).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.specfile import LoadedSpec
from tests.support import run_cli
from tests.support.putbacks import FOUND, as_found, pd_stack

JIT = "SGLANG_ENABLE_JIT_DEEPGEMM"
LOAD = ("--requests", "12", "--warmup", "0", "--output-len", "8", "--input-len", "32",
        "--answers", "off", "--rounds", "1")  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedSpec]:
    yield from pd_stack(tmp_path_factory, "unproven", knobs=(DEFAULT_KNOB, JIT))


def _bisect(stack: LoadedSpec, tmp_path: Path, *args: str) -> tuple[Any, str]:
    """``case open`` then ``case bisect ARGS`` on it: the ``--json`` document and the text of
    ``case show``."""
    led = ("--ledger", str(tmp_path / "ledger.db"))
    opened = run_cli("case", "open", "single", "--json", *led)
    cid = str(json.loads(opened.stdout)["id"])
    done = run_cli("case", "bisect", cid, *args, *LOAD, "--json", "-f", stack.source, *led,
                   timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    shown = run_cli("case", "show", cid, *led)
    assert shown.returncode == 0, shown.stderr
    return json.loads(done.stdout), shown.stdout


def _nothing_convicted(doc: Any, shown: str) -> None:
    result = doc["conclusion"]["result"]
    assert result["indices"] == [] and result["changes"] == [] and not result["minimal"]
    assert doc["conclusion"]["verdicts"] == []
    assert [p["changes"] for p in doc["probes"]] == [[]]  # the good state, and nothing more
    assert "guilty" not in doc["summary"] + shown and "nothing convicted" in doc["summary"]


@pytest.mark.timeout(600)
def test_a_test_that_never_fails_does_not_reproduce(stack: LoadedSpec, tmp_path: Path) -> None:
    doc, shown = _bisect(stack, tmp_path, "--change", f"decode:{DEFAULT_KNOB}={FOUND},384",
                         "--test", "throughput@C2<1", "--runs", "2")  # fmt: skip
    print(doc["summary"])
    _nothing_convicted(doc, shown)
    (probe,) = doc["probes"]
    assert probe["outcome"] == "undecided" and probe["bad"]["failed"] == 0
    assert probe["bad"]["sessions"] == 2 and probe["probe"]["sessions"] == 2  # measured
    assert doc["summary"].startswith("case bisect: did not reproduce")
    assert doc["conclusion"]["reproduced"] is False
    assert "did not reproduce" in shown
    as_found(stack)


@pytest.mark.timeout(600)
def test_a_test_that_always_fails_is_not_these_changes(stack: LoadedSpec, tmp_path: Path) -> None:
    doc, shown = _bisect(stack, tmp_path, "--change", f"decode:{DEFAULT_KNOB}=128,{FOUND}",
                         "--change", f"decode:{JIT}=1,", "--test", "throughput@C2>1",
                         "--runs", "4")  # fmt: skip
    print(doc["summary"])
    _nothing_convicted(doc, shown)
    (probe,) = doc["probes"]
    assert probe["outcome"] == "bad" and probe["bad"]["failed"] == probe["probe"]["failed"] == 4
    assert doc["summary"].startswith("case bisect: fails without any of the changes")
    assert doc["conclusion"]["reproduced"] is True
    as_found(stack)
