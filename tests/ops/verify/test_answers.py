"""verify's e2e layer checks answers: greedy probes through the real router, against references
the ledger keeps from a good state; the simulator's KV-transfer corruption (HTTP 200, a valid
stream, usage unchanged) fails the layer and is localized to the hand-off by what a client of a
real deployment sees: the prefill's first token agrees, the decode's differ from the first on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.answers.probes import ProbeKind
from servelab.core.answers.transfer import AnswerSite
from servelab.core.verify.answers import AnswerProbes
from servelab.core.verify.checks import Check, CheckCode
from servelab.core.verify.contract import VerifyReport
from servelab.io.ledger.ledger import Ledger
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.verify.e2e import E2EOptions
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail, render_verify
from tests.support.http import set_faults
from tests.support.specs import PdEnv, PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack

pytestmark = pytest.mark.timeout(240)
_C = CheckCode


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(time_scale=0.05)
    try:
        yield st
    finally:
        st.stop()


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, stack: SimStack) -> LoadedSpec:
    root = tmp_path_factory.mktemp("verify-answers")
    PdEnv(knob=None).write(root / "env")
    (root / "servelab.toml").write_text(pd_spec_toml(PdPorts.of(stack), name="answers", knobs=()))
    return load_spec(root / "servelab.toml")


@pytest.fixture
def corrupt(stack: SimStack) -> Iterator[None]:
    set_faults(stack.decode_url, kv_corrupt=True)
    try:
        yield
    finally:
        set_faults(stack.decode_url, kv_corrupt=False)


def _answers(report: VerifyReport) -> Check:
    found = [c for c in report.layer("e2e") if isinstance(c.data, AnswerProbes)]
    assert len(found) == 1, render_verify(report)
    return found[0]


async def _e2e(loaded: LoadedSpec, ledger: Ledger | None, **opts: object) -> VerifyReport:
    return await verify(loaded, layers=("e2e",), ledger=ledger, e2e=E2EOptions(**opts))  # type: ignore[arg-type]


async def test_transfer_corruption_is_caught_and_localized(
    loaded: LoadedSpec, stack: SimStack, tmp_path: Path
) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        taken = _answers(await _e2e(loaded, ledger))
        same = _answers(await _e2e(loaded, ledger))
        set_faults(stack.decode_url, kv_corrupt=True)
        try:
            report = await _e2e(loaded, ledger)
        finally:
            set_faults(stack.decode_url, kv_corrupt=False)
        again = _answers(await _e2e(loaded, ledger))
    assert taken.code is _C.E2E_ANSWERS_REFERENCES_TAKEN and taken.ok, check_detail(taken)
    assert isinstance(taken.data, AnswerProbes) and taken.data.references_id is not None
    assert [o.kind for o in taken.data.outcomes] == [ProbeKind.PLAIN, ProbeKind.TOOL,
                                                     ProbeKind.RETRIEVAL]  # fmt: skip
    assert same.code is _C.E2E_ANSWERS_SAME and same.ok, check_detail(same)
    assert isinstance(same.data, AnswerProbes)
    assert same.data.references_id == taken.data.references_id
    probe = next(c for c in report.layer("e2e") if c.code is _C.E2E_PASSED)
    assert probe.ok  # the request itself answered 200: only the answers tell
    bad = _answers(report)
    assert bad.code is _C.E2E_ANSWERS_CHANGED and not bad.ok and not report.ok
    assert isinstance(bad.data, AnswerProbes) and bad.data.site is AnswerSite.KV_TRANSFER
    assert all(o.wrong and o.at == 1 and o.first_token_agrees for o in bad.data.outcomes)
    assert bad.data.outcomes[2].recalled is False  # the pass key is lost with the KV
    assert bad.data.outcomes[1].failures  # the tool call's arguments are broken
    detail = check_detail(bad)
    assert "3 of 3 wrong" in detail and "localized to the KV hand-off" in detail, detail
    assert again.code is _C.E2E_ANSWERS_SAME, check_detail(again)  # switched off: as before


async def test_a_wrong_deployment_never_becomes_its_own_reference(
    loaded: LoadedSpec, corrupt: None, tmp_path: Path
) -> None:
    with Ledger.open(tmp_path / "ledger.db") as ledger:
        report = await _e2e(loaded, ledger)
        check = _answers(report)
        assert check.code is _C.E2E_ANSWERS_CHANGED and not report.ok, check_detail(check)
        assert isinstance(check.data, AnswerProbes) and check.data.references_id is None
        assert check.data.site is None  # nothing to compare positions with: not localized
        # caught without references: the tool call does not parse, the key is not recalled
        assert [o.wrong for o in check.data.outcomes] == [False, True, True]
        rebased = _answers(await _e2e(loaded, ledger, rebase_answers=True))
        assert rebased.code is _C.E2E_ANSWERS_CHANGED  # a rebase stores only passing answers


async def test_no_ledger_and_off(loaded: LoadedSpec) -> None:
    unreferenced = _answers(await _e2e(loaded, None))
    assert unreferenced.code is _C.E2E_ANSWERS_UNREFERENCED and unreferenced.ok
    assert "no references" in check_detail(unreferenced)
    off = await _e2e(loaded, None, answer_probes=0)
    assert not [c for c in off.checks if isinstance(c.data, AnswerProbes)] and off.ok
