"""A knob the engine does not read, against a real simulated stack: a misspelled env knob is live
in the file and the process, and ``verify`` flags it with the name the engine reads; ``knob set``
says so; ``ab`` refuses it with the reason, naming ``--allow-unread``; a knob the spec
declares under ``reads_env`` is read, not flagged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.bench.contract import BenchConfig
from servelab.core.knobs.unread import ReadVerdict, UnreadKnob
from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import CheckCode
from servelab.errors import KnobError
from servelab.io.specfile import LoadedSpec, load_spec
from servelab.ops.ab.ab import run_ab
from servelab.ops.ab.config import AbConfig
from servelab.ops.knob import set_knob
from servelab.ops.verify.verify import verify
from servelab.report.knob import render_knob_change
from servelab.report.verify import check_detail
from tests.support.specs import PdPorts, write_pd_spec
from tests.support.stack import SimStack, start_stack

TYPO = "SGLANG_DISAGGREGATION_WAITING_TIMOUT"  # SGLang reads ..._WAITING_TIMEOUT
RIGHT = "SGLANG_DISAGGREGATION_WAITING_TIMEOUT"
CUSTOM = "SGLANG_CUSTOM_BUILD_KNOB"  # a custom build's: declared under reads_env
ARG_TYPO = "--max-runing-requests"  # the simulated SGLang's parser reads --max-running-requests


@pytest.fixture(scope="module")
def stack() -> Iterator[SimStack]:
    st = start_stack(time_scale=0.05, decode_env={TYPO: "60", CUSTOM: "1"}, router=False)
    try:
        yield st
    finally:
        st.stop()


@pytest.fixture
def loaded(stack: SimStack, tmp_path: Path) -> LoadedSpec:
    path = write_pd_spec(
        tmp_path, ports=PdPorts.of(stack), knob=None, decode_env=f"{TYPO}=60\n{CUSTOM}=1\n",
        knobs=(TYPO, CUSTOM, ARG_TYPO), decode_toml=f'reads_env = ["{CUSTOM}"]\n',
    )  # fmt: skip
    return load_spec(path)


async def test_verify_flags_a_misspelled_knob_with_the_name_the_engine_reads(
    loaded: LoadedSpec,
) -> None:
    report = await verify(loaded, ["decode"], layers=("config", "live"))
    unread = [c for c in report.checks if c.code is CheckCode.LIVE_KNOB_UNREAD]
    assert [c.knob for c in unread] == [TYPO, ARG_TYPO] and not report.ok  # CUSTOM: declared
    argument = unread[1].data
    assert isinstance(argument, UnreadKnob) and argument.suggestion == "--max-running-requests"
    data = unread[0].data
    assert isinstance(data, UnreadKnob) and data.suggestion == RIGHT
    assert data.version == "0.5.13.post1+sim" and "environ.py" in (data.source or "")
    assert check_detail(unread[0]).startswith(
        f"not read by SGLang 0.5.13.post1+sim (did you mean {RIGHT}?)"
    )
    live = [c for c in report.checks if c.knob == TYPO and c.code is CheckCode.LIVE_MATCH]
    assert live  # every other layer passes it: live in the process, as in the file


async def test_knob_set_says_the_engine_does_not_read_it(loaded: LoadedSpec) -> None:
    change = await set_knob(loaded, "decode", TYPO, "90")
    assert change.unread is not None and change.unread.verdict is ReadVerdict.NOT_READ
    assert encode(change)["unread"]["suggestion"] == RIGHT
    text = render_knob_change(change)
    assert f"warning: {TYPO}: not read by SGLang 0.5.13.post1+sim (did you mean {RIGHT}?)" in text
    declared = await set_knob(loaded, "decode", CUSTOM, "2")
    assert declared.unread is None and "unread" not in encode(declared)


async def test_ab_refuses_an_unread_knob_with_the_reason(loaded: LoadedSpec) -> None:
    cfg = AbConfig("decode", TYPO, "60", "90", BenchConfig(url="", requests=1))
    with pytest.raises(
        KnobError, match=f"not read by SGLang 0.5.13.post1\\+sim \\(did you mean {RIGHT}"
    ):
        await run_ab(loaded, cfg)
    with pytest.raises(KnobError, match="--allow-unread"):
        await run_ab(loaded, cfg)
