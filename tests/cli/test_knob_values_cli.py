"""A knob's value is checked once, before anything is touched (issue 38): ``knob set`` refuses a
value that is a flag, an empty value and a value of the wrong type; ``tune`` and ``tune --plan``
refuse alike (one check), a value no knob takes before the first restart, and two spellings of
one setting. Real processes; nothing runs (no deployment is up: a command that got as far as a
restart would start one, and this test would see it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ab.tunerun import TuneKnob
from servelab.core.bench.contract import BenchConfig
from servelab.core.ledger.codec import encode
from servelab.io.ledger.ledger import Ledger
from servelab.io.ledger.tunes import TuneStore
from servelab.ops.ab.tuneconfig import TuneConfig
from tests.support import run_cli
from tests.support.processes import listening
from tests.support.specs import PdPorts, write_pd_spec

MRR = "--max-running-requests"
CHUNK = "--chunked-prefill-size"
OVERLAP = "--disable-overlap-schedule"


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[tuple[Path, PdPorts]]:
    ports = PdPorts.free(proxy=False)
    path = write_pd_spec(tmp_path, ports=ports, knobs=(MRR, CHUNK, OVERLAP), knob=None,
                         decode_env="SGLANG_ARGS=--max-running-requests 32\n")  # fmt: skip
    text = path.read_text().replace(
        'depends_on = ["prefill"]\n', 'depends_on = ["prefill"]\nargs_env = "SGLANG_ARGS"\n', 1
    )
    path.write_text(text)
    try:
        yield path, ports
    finally:  # were a refusal to fail and a tune to start the deployment, it is stopped
        if any(listening(port) for port in ports.listened()):
            run_cli("down", "-f", str(path), timeout=120)


def _env_file(spec: Path) -> str:
    return (spec.parent / "env" / "decode.env").read_text()


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (f"{MRR}=--disable-radix-cache", "is an option, not a value"),
        (f"{MRR}=", "needs a value: an empty one would be written as the bare flag"),
        (f"{CHUNK}=*", "takes a whole number (the engine's parser reads it as int), not '*'"),
        (f"{MRR}=4 --disable-radix-cache", "holds white space"),
        (f"{OVERLAP}=maybe", "its value is on or off"),
        (f"{MRR}=-4", "takes a number at least 1, not '-4'"),
        (f"{MRR}=\uff16\uff14", "holds a digit that is not ASCII 0-9"),
    ],
    ids=["a-flag", "empty", "glob", "two-words", "not-a-boolean", "negative", "full-width"],
)
def test_knob_set_refuses_a_value_the_engine_would_not_read_back(
    spec: tuple[Path, PdPorts], assignment: str, message: str
) -> None:
    """Defects 14 and 15 (issue 38): --max-running-requests=--disable-radix-cache wrote an
    undeclared argument, --max-running-requests= a bare flag read back as "on", and
    --chunked-prefill-size=* a glob the launch shell expanded."""
    path, _ = spec
    before = _env_file(path)
    done = run_cli("knob", "set", "decode", "-f", str(path), "--", assignment)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert _env_file(path) == before  # nothing written


def test_a_knob_value_the_engine_takes_is_written(spec: tuple[Path, PdPorts]) -> None:
    path, _ = spec
    done = run_cli("knob", "set", "decode", "-f", str(path), "--", f"{CHUNK}=-1")
    assert done.returncode == 0, done.stderr
    assert f'{CHUNK} -1"' in _env_file(path)  # a negative number is a value (chunking off)


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        (f"decode:{OVERLAP}=on,true", "'on' and 'true' are one setting (on): each value once"),
        (f"decode:{OVERLAP}=on,maybe", "its value is on or off (true or false), not 'maybe'"),
        (f"decode:{MRR}=16,*", "takes a whole number"),
        ("decode:--undeclared=1,2", "is not a declared knob of 'decode'"),
        (f"nosuch:{MRR}=1,2", "nosuch"),
        (f"decode:{MRR}=\uff16\uff14,64", "holds a digit that is not ASCII 0-9"),
    ],
    ids=["one-setting", "maybe", "glob", "undeclared", "unknown-service", "full-width"],
)
def test_tune_and_its_plan_refuse_alike_before_anything_runs(
    spec: tuple[Path, PdPorts], knob: str, message: str
) -> None:
    """Defects 16, 17 and 23 (issue 38): on,true ran two arms of one setting; on,maybe restarted
    and measured on before it refused maybe; --plan accepted an undeclared knob, an unknown
    service and on,maybe. Every value is checked by one function before the first restart."""
    path, ports = spec
    for plan in ((), ("--plan",)):
        done = run_cli("tune", "-f", str(path), "--knob", knob, *plan, "--requests", "4",
                       "--concurrency", "1", timeout=120)  # fmt: skip
        assert done.returncode == 2, (plan, done.stdout, done.stderr)
        assert message in done.stderr, (plan, done.stderr)
    assert not any(listening(port) for port in ports.listened())  # nothing was started


def test_tune_resume_refuses_a_recorded_value_the_knob_does_not_take(
    spec: tuple[Path, PdPorts], tmp_path: Path
) -> None:
    """Defect 17 (issue 38): --resume repeated the visits of a tune with a value the knob does
    not take; it is checked as a new tune's are, before anything runs."""
    path, ports = spec
    ledger_path = tmp_path / "tunes.db"
    bench = BenchConfig(url="", concurrencies=(1,), requests=4)
    cfg = TuneConfig((TuneKnob("decode", OVERLAP, ("on", "maybe")),), bench)
    with Ledger.open(ledger_path) as ledger:
        tune_id = TuneStore(ledger).start(knobs=cfg.names, config=encode(cfg), original=(None,))
    done = run_cli("tune", "-f", str(path), "--resume", str(tune_id), "--ledger",
                   str(ledger_path), timeout=120)  # fmt: skip
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "its value is on or off (true or false), not 'maybe'" in done.stderr
    assert not any(listening(port) for port in ports.listened())
