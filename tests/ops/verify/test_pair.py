"""The P/D pair layer against real stacks: a prefill with page size 64 and a decode with 32 fail
``verify`` before any request, on SGLang and on vLLM (each with its own field names), with both
values and where each came from; the simulator breaks the transfer as the engines do (SGLang:
wrong answers; vLLM: the request fails)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from servelab.core.ledger.codec import encode
from servelab.core.verify.checks import Check, CheckCode, Layer
from servelab.core.verify.pair import FieldVerdict, PairReport
from servelab.core.verify.record import StoredCheck
from servelab.io.specfile import load_spec
from servelab.ops.verify.verify import verify
from servelab.report.verify import check_detail
from servelab.sim.text import plan_output
from tests.support.http import metric, post
from tests.support.specs import PdPorts, pd_spec_toml
from tests.support.stack import SimStack, start_stack
from tests.support.vllmstack import VllmStack, vllm_stack

SCALE = 0.05


@pytest.fixture(scope="module")
def sglang() -> Iterator[SimStack]:
    st = start_stack(
        time_scale=SCALE, prefill_args=["--page-size", "64"], decode_args=["--page-size", "32"]
    )
    try:
        yield st
    finally:
        st.stop()


def _spec(tmp_path: Path, ports: PdPorts, engine: str) -> Path:
    text = pd_spec_toml(ports, name="pair", env_dir=None, knobs=())
    if engine == "vllm":
        text = text.replace('name = "pair"', 'name = "pair"\nengine = "vllm"')
    path = tmp_path / "servelab.toml"
    path.write_text(text)
    return path


def _served(base: str, counter: str) -> float:
    """The worker's counter of finished requests (absent before the first: 0)."""
    try:
        return metric(base, counter)
    except KeyError:
        return 0.0


def _pair(checks: list[Check]) -> tuple[Check, PairReport]:
    (check,) = checks
    assert isinstance(check.data, PairReport)
    return check, check.data


async def test_sglang_page_size_mismatch_fails_before_any_request(
    sglang: SimStack, tmp_path: Path
) -> None:
    loaded = load_spec(_spec(tmp_path, PdPorts.of(sglang), "sglang"))
    report = await verify(loaded, layers=("pair",))
    check, pair = _pair(report.checks)
    assert check.layer is Layer.PAIR and check.code is CheckCode.PAIR_MISMATCH and not check.ok
    assert not report.ok
    page = next(f for f in pair.fields if f.name == "page_size")
    assert page.verdict is FieldVerdict.MISMATCH
    side = ("page_size", "cmdline")
    assert (page.prefill.value, page.prefill.field, page.prefill.source) == ("64", *side)
    assert (page.decode.value, page.decode.field, page.decode.source) == ("32", *side)
    others = {f.name: f.verdict for f in pair.fields if f.name != "page_size"}
    assert others == dict.fromkeys(others, FieldVerdict.MATCH), others
    text = check_detail(check)
    assert "page size 64 (page_size, from its command line) on prefill" in text
    assert "vs 32 (page_size, from its command line) on decode" in text
    assert json.loads(json.dumps(encode(check, StoredCheck)))["code"] == "pair.mismatch"
    assert _served(sglang.decode_url, "sglang:num_requests_total") == 0  # before any request


async def test_sglang_mismatch_gives_wrong_answers_not_an_error(sglang: SimStack) -> None:
    prompt = "the pair layer " * 20
    status, body = post(
        sglang.router_url + "/generate",
        {"text": prompt, "sampling_params": {"max_new_tokens": 8, "temperature": 0}},
    )
    assert status == 200, body
    answer = json.loads(body)["text"]
    right = "".join(plan_output(0, prompt, 8).pieces)
    assert answer != right  # no error, no hang: a wrong answer
    assert answer[:2] == right[:2]  # the prefill's first token arrived as it was


@pytest.fixture(scope="module")
def vllm() -> Iterator[VllmStack]:
    dev = {"VLLM_SERVER_DEV_MODE": "1"}
    with vllm_stack(
        time_scale=SCALE, env=dev, prefill_args=["--block-size", "64"],
        decode_args=["--block-size", "32"],
    ) as st:  # fmt: skip
        yield st


def _vllm_ports(st: VllmStack) -> PdPorts:
    return PdPorts(st.prefill_port, st.side_port, st.decode_port, st.router_port,
                   st.prometheus_port)  # fmt: skip


async def test_vllm_block_size_mismatch_fails_before_any_request(
    vllm: VllmStack, tmp_path: Path
) -> None:
    loaded = load_spec(_spec(tmp_path, _vllm_ports(vllm), "vllm"))
    report = await verify(loaded, layers=("pair",))
    check, pair = _pair(report.checks)
    assert check.code is CheckCode.PAIR_MISMATCH and not report.ok
    page = next(f for f in pair.fields if f.name == "page_size")
    field = "vllm_config.cache_config.block_size"
    assert (page.prefill.value, page.prefill.field, page.prefill.source) == ("64", field, "cmdline")
    assert (page.decode.value, page.decode.field, page.decode.source) == ("32", field, "cmdline")
    assert page.verdict is FieldVerdict.MISMATCH
    assert "a whole multiple" in check_detail(check)
    assert _served(vllm.decode_url, "vllm:request_success_total") == 0


async def test_vllm_mismatch_fails_the_request(vllm: VllmStack) -> None:
    body = {"model": "servelab-sim", "max_tokens": 4,
            "messages": [{"role": "user", "content": "hello " * 40}]}  # fmt: skip
    status, answer = post(vllm.router_url + "/v1/chat/completions", body)
    assert status >= 500, answer  # the handshake refuses the prefill's blocks: an error
    status, info = post(vllm.decode_url + "/v1/chat/completions", body)
    assert status == 200, info  # a direct request (no remote prefill) is served


async def test_vllm_without_dev_mode_is_unknown_never_a_pass(tmp_path: Path) -> None:
    with vllm_stack(time_scale=SCALE) as st:
        loaded = load_spec(_spec(tmp_path, _vllm_ports(st), "vllm"))
        report = await verify(loaded, layers=("pair",))
    check, pair = _pair(report.checks)
    assert check.code is CheckCode.PAIR_UNKNOWN and not check.ok
    assert pair.prefill_error is not None and "VLLM_SERVER_DEV_MODE=1" in pair.prefill_error
    assert "unknown, not a pass" in check_detail(check)
