"""``--answers gate`` (the default) with a ``--keep`` that keeps a candidate, where no answer
probe can be sent: refused before anything runs (the eleventh hostile pass: ``ab --requests 18
--keep better`` ran the whole A/B and kept the faster arm with its answers never checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servelab.core.deploy.defaultspec import DEFAULT_KNOB
from servelab.io.lock import hold
from servelab.io.specfile import load_spec
from tests.support import run_cli
from tests.support.specs import write_pd_spec

NOT_UP = "nothing is started: the refusal comes first"


@pytest.fixture
def spec(tmp_path: Path) -> str:
    return str(write_pd_spec(tmp_path, knob="512"))


@pytest.mark.parametrize(
    "keep", ["better", "candidate", "256"],
)  # fmt: skip
def test_ab_refuses_a_keep_the_gate_could_never_honour(spec: str, keep: str) -> None:
    done = run_cli("ab", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=512,256",
                   "--requests", "18", "--keep", keep, "--json")  # fmt: skip
    assert done.returncode == 2, (NOT_UP, done.stderr)
    doc = json.loads(done.stdout)
    assert doc["ok"] is False
    assert f"--keep {keep} is refused: under --answers gate" in doc["error"]
    assert "cannot carry one probe" in doc["error"] and "--answers check" in doc["error"]


def test_ab_refuses_a_keep_better_of_a_trace_under_the_gate(spec: str, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 4}\n' * 3,
                     encoding="utf-8")  # fmt: skip
    done = run_cli("ab", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=512,256",
                   "--trace", str(trace), "--keep", "better")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "a replayed trace carries no probes" in done.stderr


def test_tune_refuses_keep_best_the_gate_could_never_honour(spec: str) -> None:
    done = run_cli("tune", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=512,256",
                   "--requests", "18", "--keep", "best")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--keep best is refused: under --answers gate" in done.stderr


@pytest.mark.parametrize(
    "args",
    [("--keep", "baseline"), ("--answers", "check", "--keep", "better"),
     ("--answers", "off", "--keep", "better"), ("--requests", "19", "--keep", "better")],
)  # fmt: skip
def test_what_the_gate_can_honour_is_not_refused(spec: str, args: tuple[str, ...]) -> None:
    """Keeping the baseline, answers checked or off, or runs long enough for a probe: the A/B
    goes on to its next step, the deployment's lock (held here: it stops there, never at this
    rule)."""
    extra = () if "--requests" in args else ("--requests", "18")
    with hold(load_spec(Path(spec)).state_dir, "servelab test", name="t"):
        done = run_cli("ab", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=512,256", *extra,
                       *args)  # fmt: skip
    assert done.returncode != 0 and "is refused: under --answers gate" not in done.stderr
    assert "servelab test" in done.stderr, done.stderr


def test_the_candidate_in_another_spelling_is_refused_by_the_gate_too(spec: str) -> None:
    """The thirteenth pass: ``--keep 0256`` (the candidate ``256`` in another spelling) was not
    taken for the candidate, so the gate's rule let it through and an unchecked candidate would
    have been kept. The deployment's lock is held: without the rule the A/B stops there."""
    with hold(load_spec(Path(spec)).state_dir, "servelab test", name="t"):
        done = run_cli("ab", "-f", spec, "--knob", f"decode:{DEFAULT_KNOB}=512,256",
                       "--requests", "18", "--keep", "0256")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--keep 0256 is refused: under --answers gate" in done.stderr, done.stderr
