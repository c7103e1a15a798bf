"""Two deployments of one name (the default ``servelab``) sharing one ledger (issue 38, the
sixteenth pass): verify's answer references are each deployment's own. Two real simulated stacks
behind the real router. Before, the references were keyed by the name only: the second
deployment's verify found the first's and judged its answers against them ("answers same as
references #1", the first's; two deployments of one model name serving other weights or another
quantization would have read "answers changed", a wrong verdict on a healthy deployment)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

import servelab.ops.verify.answers as answers_mod
from servelab.core.verify.answers import AnswerProbes
from servelab.core.verify.checks import Check, CheckCode
from servelab.io.ledger.answers import AnswerStore
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.verify.answers import answers_owner, deployment_references
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail, render_verify
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import start_stack

pytestmark = pytest.mark.timeout(240)
_C = CheckCode


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LoadedSpec, LoadedSpec]]:
    first = start_stack(time_scale=0.05)
    try:
        other = start_stack(time_scale=0.05)
        try:
            specs = []
            for stack, folder in ((first, "a"), (other, "b")):
                root = tmp_path_factory.mktemp(folder)
                PdEnv(knob=None).write(root / "env")
                (root / "servelab.toml").write_text(
                    pd_spec_toml(PdPorts.of(stack), name="servelab", knobs=())
                )
                specs.append(load_spec(root / "servelab.toml"))
            yield specs[0], specs[1]
        finally:
            other.stop()
    finally:
        first.stop()


async def _answers(loaded: LoadedSpec, ledger: Ledger) -> Check:
    report = await verify(loaded, layers=("e2e",), ledger=ledger)
    found = [c for c in report.layer("e2e") if isinstance(c.data, AnswerProbes)]
    assert len(found) == 1, render_verify(report)
    return found[0]


async def test_same_named_deployments_keep_their_own_references(
    two: tuple[LoadedSpec, LoadedSpec], tmp_path: Path
) -> None:
    a, b = two
    with Ledger.open(tmp_path / "shared.db") as ledger:
        taken_a = await _answers(a, ledger)
        taken_b = await _answers(b, ledger)
        again_a = await _answers(a, ledger)
        again_b = await _answers(b, ledger)
        assert isinstance(taken_a.data, AnswerProbes), check_detail(taken_a)
        model = taken_a.data.model
        refs_a = deployment_references(ledger, answers_owner(a), model)
        refs_b = deployment_references(ledger, answers_owner(b), model)
    assert taken_a.code is _C.E2E_ANSWERS_REFERENCES_TAKEN, check_detail(taken_a)
    # b's healthy answers are b's own references, never judged against a's
    assert taken_b.code is _C.E2E_ANSWERS_REFERENCES_TAKEN and taken_b.ok, check_detail(taken_b)
    assert again_a.code is _C.E2E_ANSWERS_SAME, check_detail(again_a)
    assert again_b.code is _C.E2E_ANSWERS_SAME, check_detail(again_b)
    assert isinstance(again_a.data, AnswerProbes) and isinstance(again_b.data, AnswerProbes)
    assert again_a.data.references_id != again_b.data.references_id
    assert refs_a is not None and refs_b is not None and refs_a.id != refs_b.id
    assert (refs_a.id, refs_b.id) == (again_a.data.references_id, again_b.data.references_id)
    assert answers_owner(a) != answers_owner(b)
    assert answers_owner(a).startswith("servelab/router@local:")


async def test_references_stored_by_the_name_alone_are_still_read(
    two: tuple[LoadedSpec, LoadedSpec], tmp_path: Path
) -> None:
    """A ledger from before owners: its references, keyed by the name, are the name's (as a knob
    change recorded before marks is anyone's of that name); new ones are the deployment's."""
    a, _b = two
    with Ledger.open(tmp_path / "old.db") as ledger:
        taken = await _answers(a, ledger)
        assert isinstance(taken.data, AnswerProbes) and taken.data.references_id is not None
        model = taken.data.model
        mine = deployment_references(ledger, answers_owner(a), model)
        assert mine is not None and deployment_references(ledger, "servelab", model) is None
    with Ledger.open(tmp_path / "old2.db") as ledger:
        old = AnswerStore(ledger).add(replace(mine, key=answers_mod._key("servelab", model)))
        found = await _answers(a, ledger)
    assert found.code is _C.E2E_ANSWERS_SAME, check_detail(found)
    assert isinstance(found.data, AnswerProbes) and found.data.references_id == old.id
