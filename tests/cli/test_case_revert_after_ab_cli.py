"""``case revert`` after an ``ab`` of the same knob (issue 38, the twenty-eighth pass): the A/B
writes its arms' values and then the original back, each a recorded knob change; the revert
proposed the value before the put-back (an arm's) instead of the value before the change that
set the knob. Real processes, a real stack, a real ledger file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.io.specfile import LoadedSpec, load_spec
from tests.support import run_cli
from tests.support.casecli import TARGET, seeded_ledger
from tests.support.casecli import cli_json as _json
from tests.support.deployed import deployed
from tests.support.history import K
from tests.support.specs import write_pd_spec


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LoadedSpec]:
    loaded = load_spec(write_pd_spec(tmp_path / "dep", time_scale=0.02, name="revert-after-ab"))
    with deployed(loaded):
        yield loaded


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("keep", "before"), [(None, "256"), ("128", "512"), ("1024", "512")])
def test_case_revert_after_an_ab_goes_to_the_value_before_the_change(
    stack: LoadedSpec, tmp_path: Path, keep: str | None, before: str
) -> None:
    """The ledger holds 256 → 512 (the change under suspicion); an A/B of 128 vs 1024 then
    writes both arms and puts 512 back: the revert goes to 256, not to an arm's value. An A/B
    that kept an arm set it from 512: the revert goes to 512, not to the other arm's value."""
    led = ("--ledger", str(seeded_ledger(tmp_path / "l" / "ledger.db")))
    spec = ("-f", stack.source)
    env_file = stack.env_file("decode")
    assert env_file is not None and f"{K}=512" in env_file.read_text()
    cid = str(_json("case", "open", "agentic hang", *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "latest change", *led)
    kept = () if keep is None else ("--keep", keep)
    ab = run_cli("ab", *spec, *led, "--knob", f"decode:{K}=128,1024", "--concurrency", "1",
                 "--requests", "2", "--repeat", "1", "--warmup", "0", "--output-len", "4",
                 "--input-len", "8", "--answers", "check", *kept, "--json",
                 timeout=240)  # fmt: skip
    assert ab.returncode in (0, 1), ab.stderr
    assert f"{K}={keep or 512}\n" in env_file.read_text()
    history = _json("ledger", "export", *led)["knob_changes"]
    assert {c["new"] for c in history} >= {"128", "1024"}  # the arms

    reverted = _json("case", "revert", cid, TARGET, "--yes", *spec, *led)
    assert (reverted["ok"], reverted["live"]) == (True, before), reverted
    assert f"{K}={before}\n" in env_file.read_text()


@pytest.mark.timeout(300)
def test_case_revert_after_an_ab_alone_asks_for_the_value(
    stack: LoadedSpec, tmp_path: Path
) -> None:
    """No change but the A/B's (it left the knob as it found it): nothing says which value to
    revert to, and the revert says so and asks for ``--to`` (the demo's incident says 256)."""
    led = ("--ledger", str(tmp_path / "l" / "ledger.db"))
    spec = ("-f", stack.source)
    cid = str(_json("case", "open", "agentic hang", *led)["id"])
    _json("case", "suspect", cid, TARGET, "--reason", "latest change", *led)
    ab = run_cli("ab", *spec, *led, "--knob", f"decode:{K}=128,1024", "--concurrency", "1",
                 "--requests", "2", "--repeat", "1", "--warmup", "0", "--output-len", "4",
                 "--input-len", "8", "--answers", "off", timeout=240)  # fmt: skip
    assert ab.returncode in (0, 1), ab.stderr
    refused = run_cli("case", "revert", cid, TARGET, "--yes", *spec, *led)
    assert refused.returncode != 0, refused.stdout
    said = " ".join(refused.stderr.split())
    assert f"no recorded change set decode/{K} to 512 from another value" in said, said
    assert "say the value to revert to with --to" in said and "Traceback" not in said, said
    reverted = _json("case", "revert", cid, TARGET, "--to", "256", "--yes", *spec, *led)
    assert (reverted["ok"], reverted["live"]) == (True, "256"), reverted
