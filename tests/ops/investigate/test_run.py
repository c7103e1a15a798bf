"""What each of ``servelab investigate``'s experiments co-restarts, asked before it runs (one
question per experiment, naming the suspects it decides and the services in restart order)."""

from __future__ import annotations

from pathlib import Path

from servelab.core.deploy.topology import restart_plan
from servelab.core.investigate.events import ExperimentRestarts
from servelab.core.investigate.plan import (
    Bisect,
    ComponentTest,
    GoodState,
    KnobTest,
    Localize,
    Resolve,
    SlowTest,
)
from servelab.core.investigate.state import SuspectChange
from servelab.io.specfile import load_spec
from servelab.ops.context import operation
from servelab.ops.fileids import file_identities
from servelab.ops.investigate.run import experiment_restarts
from tests.support.specs import write_pd_spec
from tests.support.xpyd import write_2p2d_spec


def test_each_experiment_names_what_it_co_restarts_and_the_rest_ask_nothing(
    tmp_path: Path,
) -> None:
    spec = load_spec(write_pd_spec(tmp_path, name="asked", proxy_args=[])).spec
    knob = SuspectChange("decode", "K", "256", "512", "512")
    other = SuspectChange("prefill", "P", "a", "b", "b")
    assert experiment_restarts(spec, KnobTest(knob)) == ExperimentRestarts(
        "case test", (knob.target,), ("decode", "router", "proxy"))  # fmt: skip
    assert experiment_restarts(spec, SlowTest(knob)) == ExperimentRestarts(
        "ab", (knob.target,), ("decode", "router", "proxy"))  # fmt: skip
    good = experiment_restarts(spec, GoodState((knob, other)))
    assert good is not None and good.how == "good state"
    assert good.targets == (knob.target, other.target)
    assert set(good.services) == {"prefill", "decode", "router", "proxy"}
    assert good.services.index("router") > good.services.index("decode")  # in restart order
    assert experiment_restarts(spec, Bisect((knob, other))) == replace_how(good, "bisect")
    for nothing in (ComponentTest("component:proxy"), Localize(), Resolve()):
        assert experiment_restarts(spec, nothing) is None  # the differential restarts nothing


def replace_how(r: ExperimentRestarts, how: str) -> ExperimentRestarts:
    return ExperimentRestarts(how, r.targets, r.services)


async def test_an_experiment_co_restarts_a_service_whose_env_file_links_to_the_suspects(
    tmp_path: Path,
) -> None:
    """decode-2's env file a symbolic link to decode-1's: one file, so an experiment on
    decode-1's knob co-restarts decode-2 too (as ``restart`` does), and the question says so
    (the paths as written differ: it named decode-1 and the router only)."""
    spec_path, _ = write_2p2d_spec(tmp_path)
    env = tmp_path / "env"
    (env / "decode-2.env").unlink()
    (env / "decode-2.env").symlink_to("decode.env")
    loaded = load_spec(spec_path)
    knob = SuspectChange("decode-1", "SGLANG_SM120_MMA_TARGET_CTAS", "512", "384", "384")
    async with operation(loaded) as op:
        same = await file_identities(op)
    said = experiment_restarts(loaded.spec, KnobTest(knob), same)
    assert said == ExperimentRestarts(
        "case test", (knob.target,), ("decode-1", "decode-2", "router"))  # fmt: skip
    assert restart_plan(loaded.spec, ["decode-1"], same) == list(said.services)
    alone = experiment_restarts(loaded.spec, KnobTest(knob))  # the paths as written: not linked
    assert alone is not None and "decode-2" not in alone.services
